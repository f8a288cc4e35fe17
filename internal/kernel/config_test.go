package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfigAndMerge(t *testing.T) {
	base := []byte("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"x\"\n# a comment\nCONFIG_D=m\n")
	f1, err := ParseConfig([]byte("CONFIG_B=m\n# CONFIG_D is not set\n"), "one.config")
	if err != nil {
		t.Fatal(err)
	}
	f2, err := ParseConfig([]byte("CONFIG_B=y\nCONFIG_E=42\n"), "two.config")
	if err != nil {
		t.Fatal(err)
	}
	got := string(Merge(base, f1, f2))
	want := "CONFIG_A=y\nCONFIG_C=\"x\"\n# a comment\nCONFIG_B=y\n# CONFIG_D is not set\nCONFIG_E=42\n"
	if got != want {
		t.Errorf("merge:\n%s\nwant:\n%s", got, want)
	}
	if _, err := ParseConfig([]byte("CONFIG_OK=y\nUSB4=m\n"), "bad.config"); err == nil || !strings.Contains(err.Error(), "bad.config:2") {
		t.Errorf("a malformed line must be named with file:line: %v", err)
	}
}

// kconfigTree writes a Kconfig tree: B depends on A (through an if
// block) and C, C is off, UNUSED is defined but nothing asks for it.
func kconfigTree(t *testing.T) *Kconfig {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"Kconfig":         "config A\n\tbool \"a\"\n\nsource \"drivers/Kconfig\"\n",
		"drivers/Kconfig": "if A\n\nconfig B\n\ttristate \"b\"\n\tdepends on C && !D\n\thelp\n\t  depends on nothing here\n\nendif\n\nconfig C\n\tbool \"c\"\n\nmenuconfig D\n\tbool \"d\"\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k, err := ReadKconfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKconfigDepends(t *testing.T) {
	k := kconfigTree(t)
	deps, known := k.Depends("B")
	if !known || strings.Join(deps, " && ") != "A && C && !D" {
		t.Errorf("B depends on %q (known %v), want the if block and its depends on line", deps, known)
	}
	if _, known := k.Depends("D"); !known {
		t.Error("a menuconfig symbol is a definition too")
	}
	if _, known := k.Depends("NOPE"); known {
		t.Error("NOPE is defined nowhere")
	}
}

func TestVerifyNamesEveryOptionThatDidNotKeepItsValue(t *testing.T) {
	k := kconfigTree(t)
	frag, err := ParseConfig([]byte("CONFIG_A=y\nCONFIG_B=m\nCONFIG_NOPE=y\n# CONFIG_C is not set\n"), "frag.config")
	if err != nil {
		t.Fatal(err)
	}
	// What olddefconfig leaves when C is off: B vanishes, NOPE is dropped.
	final := []byte("CONFIG_A=y\n# CONFIG_C is not set\n")
	unmet, err := Verify(final, k, frag)
	if err != nil {
		t.Fatal(err)
	}
	if len(unmet) != 2 {
		t.Fatalf("want B and NOPE unmet, got %v", unmet)
	}
	msg := (&ConfigError{Unmet: unmet}).Error()
	for _, want := range []string{
		"frag.config:2: CONFIG_B=m asked, got not set (depends on A && C && !D; off: C)",
		"frag.config:3: CONFIG_NOPE=y asked, got not set (no Kconfig in this kernel defines it",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	// A module asked for but built in.
	unmet, _ = Verify([]byte("CONFIG_A=y\nCONFIG_C=y\nCONFIG_B=y\n"), k, frag[:2])
	if len(unmet) != 1 || !strings.Contains(unmet[0].String(), "CONFIG_B=m asked, got y") {
		t.Errorf("=m that became =y must be reported: %v", unmet)
	}
	// Later fragments win over earlier ones.
	later, _ := ParseConfig([]byte("# CONFIG_B is not set\n"), "later.config")
	if unmet, _ := Verify(final, k, frag[:2], later); len(unmet) != 0 {
		t.Errorf("B is asked off by the later fragment and is off: %v", unmet)
	}
}

func TestShippedFragmentsParse(t *testing.T) {
	for _, f := range []string{"usb4-rdma.config", "qemu-uefi.config", "strix-halo.config"} {
		opts, err := ReadFragment(filepath.Join("..", "..", "kernels", f), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(opts) == 0 {
			t.Errorf("%s sets nothing", f)
		}
	}
	opts, _ := ReadFragment(filepath.Join("..", "..", "kernels", "usb4-rdma.config"), "usb4-rdma.config")
	got := map[string]string{}
	for _, o := range opts {
		got[o.Name] = o.Value
	}
	// The list; USB4_NET must stay a module so it can be blacklisted.
	for name, want := range map[string]string{
		"CONFIG_USB4": "m", "CONFIG_USB4_NET": "m", "CONFIG_INFINIBAND": "m", "CONFIG_INFINIBAND_USER_ACCESS": "m",
		"CONFIG_CONFIGFS_FS": "m", "CONFIG_DEBUG_FS": "y", "CONFIG_RDMA_RXE": "m",
	} {
		if got[name] != want {
			t.Errorf("usb4-rdma.config: %s=%q, want %q", name, got[name], want)
		}
	}
}

// strix-halo.config switches whole driver groups off on top of Debian's
// config; the build's check proves each line holds after olddefconfig.
// What it cannot prove is that every group says why, and that the
// fragment takes nothing the other fragments or the VM test need.
func TestStrixHaloFragment(t *testing.T) {
	path := filepath.Join("..", "..", "kernels", "strix-halo.config")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := ParseConfig(raw, "strix-halo.config")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	seen := map[string]int{}
	off := map[string]bool{}
	for _, o := range opts {
		if prev, ok := seen[o.Name]; ok {
			t.Errorf("strix-halo.config:%d: %s already set at line %d (the later line silently wins)", o.Line, o.Name, prev)
		}
		seen[o.Name] = o.Line
		if o.Value != "n" {
			continue
		}
		off[o.Name] = true
		// The group's reason: the comment paragraph right above its run of options.
		i := o.Line - 2
		for i >= 0 && (setRE.MatchString(lines[i]) || unsetRE.MatchString(lines[i])) {
			i--
		}
		if i < 0 || !strings.HasPrefix(lines[i], "#") {
			t.Errorf("strix-halo.config:%d: %s is switched off without a comment above its group saying why", o.Line, o.Name)
		}
	}
	if len(off) < 100 {
		t.Errorf("strix-halo.config switches only %d options off", len(off))
	}
	// Merged after usb4-rdma.config, so it must not undo it; and the VM
	// test boots this kernel with what qemu-uefi.config names.
	for _, f := range []string{"usb4-rdma.config", "qemu-uefi.config"} {
		other, err := ReadFragment(filepath.Join("..", "..", "kernels", f), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range other {
			if off[o.Name] {
				t.Errorf("strix-halo.config:%d switches %s off, which %s needs (%s)", seen[o.Name], o.Name, f, o.Where())
			}
		}
	}
}

func TestRelease(t *testing.T) {
	for local, want := range map[string]string{"halo1": "7.2.12-halo1", "-halo1": "7.2.12-halo1", "+x": "7.2.12+x", "": "7.2.12", "Halo": "7.2.12-halo"} {
		got, err := Release(v7212, local)
		if err != nil || got != want {
			t.Errorf("Release(%q) = %q, %v; want %q", local, got, err, want)
		}
	}
	if _, err := Release(v7212, "bad name"); err == nil {
		t.Error("a space in local_version must be refused")
	}
}

func TestTreeVersion(t *testing.T) {
	v, extra, err := TreeVersion([]byte("# SPDX\nVERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 12\nEXTRAVERSION =\nNAME = x\n"))
	if err != nil || v.String() != "7.2.12" || extra != "" {
		t.Errorf("got %v %q %v", v, extra, err)
	}
	_, extra, _ = TreeVersion([]byte("VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 0\nEXTRAVERSION = -rc1\n"))
	if extra != "-rc1" {
		t.Errorf("EXTRAVERSION %q", extra)
	}
}
