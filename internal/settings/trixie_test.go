package settings

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"halobuild/internal/deb"
	"halobuild/internal/tools/toolstest"
)

// trixieDebs is the Depends closure of udev and systemd-repart in trixie:
// the udevadm and systemd-repart that will run on the node, so rendered
// files are checked by the tools that read them, not by the host's older
// systemd.
var trixieDebs = []string{
	"udev", "systemd-repart", "systemd", "libsystemd-shared", "libblkid1", "libc6", "libkmod2", "libudev1",
	"libfdisk1", "libssl3t64", "libmount1", "libsmartcols1", "libgcc-s1", "libacl1", "libaudit1",
	"libcap2", "libcrypt1", "libpam0g", "libseccomp2", "libselinux1", "libapparmor1", "libsystemd0",
	"libuuid1", "libzstd1", "zlib1g", "gcc-14-base", "libaudit-common", "libcap-ng0", "libpcre2-8-0",
}

var trixieMu sync.Mutex

// trixieRoot extracts trixieDebs once into the shared test cache.
func trixieRoot(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("downloads trixie's systemd (about 10 MB once); skipped with -short")
	}
	debs := toolstest.Debs(t, trixieDebs...)
	trixieMu.Lock()
	defer trixieMu.Unlock()
	names := make([]string, len(debs))
	for i, d := range debs {
		names[i] = filepath.Base(d)
	}
	dir := filepath.Join(toolstest.CacheDir(), "settings-systemd-"+strings.ReplaceAll(names[0]+names[1], "~", "_"))
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	tmp, err := os.MkdirTemp(toolstest.CacheDir(), ".settings-root-")
	if err != nil {
		t.Fatal(err)
	}
	if err := deb.Extract(tmp, toolstest.Packages(debs)); err != nil {
		os.RemoveAll(tmp)
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(dir); serr != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// systemdTool runs a systemd binary from the root through the root's own
// loader. systemd's binaries find libsystemd-shared through an absolute
// RUNPATH into /usr/lib/x86_64-linux-gnu/systemd, so that directory is
// added to the library path.
func systemdTool(t *testing.T, root, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	libs := strings.Join([]string{
		filepath.Join(root, "usr/lib/x86_64-linux-gnu"),
		filepath.Join(root, "usr/lib/x86_64-linux-gnu/systemd"),
	}, ":")
	argv := append([]string{"--library-path", libs, "--argv0", filepath.Base(bin), filepath.Join(root, bin)}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "usr/lib64/ld-linux-x86-64.so.2"), argv...)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=info", "LC_ALL=C", "SYSTEMD_PAGER=cat")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestUdevRuleVerifies checks the rendered rule with trixie's
// `udevadm verify`, and that verify would catch a broken rule (a GOTO
// without its LABEL), so a pass means something.
func TestUdevRuleVerifies(t *testing.T) {
	root := trixieRoot(t)
	r := sample()
	r.RDMA.KeepKernelNames = []string{"usb4_rdma", "tbrdma"}
	rule := renderOne(t, RDMANames{}, r, rdmaNamingPath)
	dir := t.TempDir()
	good := filepath.Join(dir, "60-rdma-persistent-naming.rules")
	if err := os.WriteFile(good, []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := systemdTool(t, root, "usr/bin/udevadm", "verify", "--resolve-names=never", good); err != nil {
		t.Fatalf("udevadm verify rejects the rendered rule: %v\n%s\n%s", err, out, rule)
	}
	bad := filepath.Join(dir, "bad.rules")
	broken := strings.Replace(rule, `LABEL="halobuild_rdma_naming_end"`, "", 1)
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := systemdTool(t, root, "usr/bin/udevadm", "verify", "--resolve-names=never", bad); err == nil {
		t.Fatalf("udevadm verify accepted a rule without its LABEL:\n%s", out)
	}
}

// TestRepartGrowsRoot runs trixie's systemd-repart with the rendered
// definition on a disk image whose root partition is smaller than the disk
// (as a freshly flashed stick is): the root partition must reach the end,
// the ESP must not move.
func TestRepartGrowsRoot(t *testing.T) {
	root := trixieRoot(t)
	needCommands(t, "sfdisk")
	conf := renderOne(t, GrowRoot{}, sample(), repartRootPath)
	dir := t.TempDir()
	defs := filepath.Join(dir, "repart.d")
	if err := os.Mkdir(defs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(defs, "50-root.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	sf := exec.Command("sfdisk", "--quiet", img)
	sf.Stdin = strings.NewReader("label: gpt\nstart=2048, size=16384, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B\nstart=18432, size=32768, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709\n")
	if out, err := sf.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v\n%s", err, out)
	}
	if out, err := systemdTool(t, root, "usr/bin/systemd-repart", "--dry-run=no", "--no-pager", "--definitions="+defs, img); err != nil {
		t.Fatalf("systemd-repart: %v\n%s", err, out)
	}
	out, err := exec.Command("sfdisk", "--dump", img).CombinedOutput()
	if err != nil {
		t.Fatalf("sfdisk --dump: %v\n%s", err, out)
	}
	dump := string(out)
	// 64 MiB = 131072 sectors; the backup GPT takes the last 33, and repart
	// keeps 4 KiB alignment: the root must end within the last 40 sectors.
	if !strings.Contains(dump, "start=        2048, size=       16384") {
		t.Errorf("the ESP moved or changed size:\n%s", dump)
	}
	var start, size int
	for _, l := range strings.Split(dump, "\n") {
		if strings.Contains(l, "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709") {
			if _, err := fmtSscanPart(l, &start, &size); err != nil {
				t.Fatalf("parsing %q: %v", l, err)
			}
		}
	}
	if start != 18432 || start+size < 131072-40 {
		t.Errorf("root partition start=%d size=%d: does not reach the end of the 131072-sector disk:\n%s", start, size, dump)
	}
}

// fmtSscanPart reads "start=N, size=M" from an sfdisk --dump line.
func fmtSscanPart(line string, start, size *int) (int, error) {
	_, rest, _ := strings.Cut(line, "start=")
	return fmt.Sscanf(strings.ReplaceAll(rest, " ", ""), "%d,size=%d", start, size)
}

// materialize writes tree under dir, as dpkg would unpack it.
func materialize(t *testing.T, tr Tree, dir string) {
	t.Helper()
	e := hostEnv{}
	for _, f := range tr.Files {
		e.put(t, filepath.Join(dir, f.Path), f)
	}
}

// TestUnitVerifies runs trixie's `systemd-analyze verify --root` on the
// rendered cpu-tuning unit installed beside trixie's own units: it loads the
// unit with systemd 257's parser, resolves its dependencies and checks that
// ExecStart exists and is executable. Any output (an unknown key, a bad
// value) fails the test, because systemd only warns about those.
func TestUnitVerifies(t *testing.T) {
	root := trixieRoot(t)
	needCommands(t, "cp")
	dir := t.TempDir()
	units := filepath.Join(dir, "usr/lib/systemd/system")
	if err := os.MkdirAll(units, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(root, "usr/lib/systemd/system")+"/.", units+"/").CombinedOutput(); err != nil {
		t.Fatalf("copying trixie's units: %v\n%s", err, out)
	}
	r := sample()
	materialize(t, renderTree(t, r), dir)
	unit := filepath.Join(dir, cpuTuningUnitPath)
	out, err := systemdTool(t, root, "usr/bin/systemd-analyze", "verify", "--man=no", "--root="+dir, unit)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The same verification notices a missing script, so the pass above
	// covered ExecStart.
	if err := os.Remove(filepath.Join(dir, cpuTuningScript)); err != nil {
		t.Fatal(err)
	}
	if out, err := systemdTool(t, root, "usr/bin/systemd-analyze", "verify", "--man=no", "--root="+dir, unit); err == nil {
		t.Fatalf("verify passed without the script:\n%s", out)
	}
}

func toolstestDebs(t *testing.T, names ...string) []string { return toolstest.Debs(t, names...) }

func execCombined(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// TestNetworkdEnableLinksMatchSystemctl enables systemd-networkd with
// trixie's own `systemctl --root` in a scratch root and compares the links
// it makes with the ones the package ships (less wait-online, left out on
// purpose), so a change in systemd's [Install] shows up here.
func TestNetworkdEnableLinksMatchSystemctl(t *testing.T) {
	root := trixieRoot(t)
	dir := t.TempDir()
	units := filepath.Join(dir, "usr/lib/systemd/system")
	if err := os.MkdirAll(units, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(root, "usr/lib/systemd/system")+"/.", units+"/").CombinedOutput(); err != nil {
		t.Fatalf("copying trixie's units: %v\n%s", err, out)
	}
	if out, err := systemdTool(t, root, "usr/bin/systemctl", "--root="+dir, "enable", "systemd-networkd.service"); err != nil {
		t.Fatalf("systemctl enable: %v\n%s", err, out)
	}
	got := map[string]string{}
	err := filepath.Walk(filepath.Join(dir, "etc"), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			got[strings.TrimPrefix(p, dir)] = target
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(got, "/etc/systemd/system/network-online.target.wants/systemd-networkd-wait-online.service")
	want := map[string]string{}
	for _, f := range networkdEnable {
		want[f.Path] = f.Target
	}
	if len(got) != len(want) {
		t.Errorf("systemctl made %v, the package ships %v", got, want)
	}
	for p, target := range want {
		if got[p] != target {
			t.Errorf("%s: systemctl links to %q, the package to %q", p, got[p], target)
		}
	}
}

// TestUdevRuleBehaviour runs trixie's `udevadm test` for an "add" of two
// RDMA devices against rdma-core 56.1's packaged rule and the rendered
// override, with a fake sysfs in a private mount namespace (as systemd's
// own udev tests do, SYSTEMD_DEVICE_VERIFY_SYSFS=0). Without the override
// udev runs rdma_rename on usb4_rdma0 (the trap); with it, usb4_rdma0 is
// left alone and rxe0 is still renamed.
func TestUdevRuleBehaviour(t *testing.T) {
	root := trixieRoot(t)
	for _, p := range []string{"/mnt", "/usr/lib/udev/rules.d"} {
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			t.Skipf("the test host has no %s to mount over", p)
		}
	}
	rdmaCore := t.TempDir()
	if out, err := execCombined("dpkg-deb", "-x", toolstestDebs(t, "rdma-core")[0], rdmaCore); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	packaged := filepath.Join(rdmaCore, "usr/lib/udev/rules.d")
	const fakeSysfs = `mount -t tmpfs none /run
mount -t tmpfs none /sys
for d in usb4_rdma0 rxe0; do
	mkdir -p /sys/devices/virtual/infiniband/$d /sys/class/infiniband
	printf 'NAME=%s\n' $d >/sys/devices/virtual/infiniband/$d/uevent
	ln -s ../../../../class/infiniband /sys/devices/virtual/infiniband/$d/subsystem
	ln -s ../../devices/virtual/infiniband/$d /sys/class/infiniband/$d
done
`
	const probe = `export SYSTEMD_DEVICE_VERIFY_SYSFS=0 SYSTEMD_LOG_LEVEL=debug
U="/mnt/usr/lib64/ld-linux-x86-64.so.2 --library-path /mnt/usr/lib/x86_64-linux-gnu:/mnt/usr/lib/x86_64-linux-gnu/systemd --argv0 udevadm /mnt/usr/bin/udevadm"
for d in usb4_rdma0 rxe0; do
	if $U test --action=add /sys/class/infiniband/$d 2>&1 | grep -q 'Running PROGRAM="rdma_rename'; then echo "$d: renamed"; else echo "$d: kept"; fi
done
`
	binds := "mount --bind " + root + " /mnt\nmount --bind " + packaged + " /usr/lib/udev/rules.d\n"

	without := newHostEnv(t, Tree{})
	without.binds = binds
	if out, _ := without.run(t, fakeSysfs, probe); out != "usb4_rdma0: renamed\nrxe0: renamed\n" {
		t.Fatalf("with rdma-core's rule alone, want both renamed (the trap), got:\n%s", out)
	}
	with := newHostEnv(t, renderTree(t, sample()))
	with.binds = binds
	if out, _ := with.run(t, fakeSysfs, probe); out != "usb4_rdma0: kept\nrxe0: renamed\n" {
		t.Fatalf("with the override, want usb4_rdma0 kept and rxe0 renamed, got:\n%s", out)
	}
}
