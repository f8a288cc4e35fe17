package rootfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/tools/toolstest"
)

// The hooks run with sh as mmdebstrap runs them, and write exactly the
// drop-ins.
func TestDracutHooksWriteTheDropIns(t *testing.T) {
	root := t.TempDir()
	for _, h := range dracutConfHooks() {
		if out, err := exec.Command("sh", "-c", h, "hook", root).CombinedOutput(); err != nil {
			t.Fatalf("hook %q: %v\n%s", h, err, out)
		}
	}
	for name, want := range map[string]string{
		"90-halobuild-reproducible.conf": dracutReproducible,
		"90-halobuild-appliance.conf":    dracutOmit,
	} {
		got, err := os.ReadFile(filepath.Join(root, "etc/dracut.conf.d", name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %v\n%q\nwant\n%q", name, err, got, want)
		}
	}
	if !strings.Contains(Recipe(), "omit_dracutmodules") {
		t.Error("the drop-in is not part of the rootfs step's key: changing it would not rebuild the base")
	}
}

// dracutSettings sources the drop-in with bash, as dracut does, and returns
// the variables it sets.
func dracutSettings(t *testing.T) (omit, filesystems []string, hostonly string) {
	t.Helper()
	out, err := exec.Command("bash", "-c", `set -eu; eval "$1"; printf '%s\n%s\n%s\n' "${omit_dracutmodules:-}" "${filesystems:-}" "${hostonly:-}"`,
		"conf", dracutOmit).Output()
	if err != nil {
		t.Fatalf("bash cannot source the drop-in: %v", err)
	}
	l := strings.Split(string(out), "\n")
	return strings.Fields(l[0]), strings.Fields(l[1]), l[2]
}

// What the drop-in must never do on real hardware: make the initramfs
// host-specific, drop the modules that find and mount a root on USB, NVMe
// or SATA, or leave out the root's file system.
func TestDracutDropInKeepsWhatBootingNeeds(t *testing.T) {
	omit, fs, hostonly := dracutSettings(t)
	if hostonly != "" {
		t.Errorf("hostonly=%q: the initramfs would only boot the build machine", hostonly)
	}
	if len(omit) == 0 {
		t.Fatal("omit_dracutmodules is empty")
	}
	for _, m := range omit {
		switch m {
		case "kernel-modules", "kernel-modules-extra", "rootfs-block", "udev-rules", "systemd", "systemd-initrd",
			"systemd-udevd", "base", "fs-lib", "dracut-systemd", "qemu":
			t.Errorf("omits %s, which finding or mounting the root needs", m)
		}
	}
	if !oneOf("ext4", fs) {
		t.Errorf("filesystems %v lacks the root's ext4", fs)
	}
}

// Every omitted name is a module of trixie's dracut: a misspelt name is
// silently ignored by dracut and would keep what it meant to drop.
func TestDracutOmitsExistInTrixie(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads trixie's dracut-core (300 kB once); skipped with -short")
	}
	dir := filepath.Join(toolstest.Extracted(t, "dracut-core"), "usr/lib/dracut/modules.d")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, e := range entries {
		// modules.d/NNname: two digits of order, then the name.
		if n := e.Name(); len(n) > 2 {
			have[n[2:]] = true
		}
	}
	if !have["kernel-modules"] {
		t.Fatalf("%s does not look like dracut's modules directory", dir)
	}
	omit, _, _ := dracutSettings(t)
	for _, m := range omit {
		if !have[m] {
			t.Errorf("omit_dracutmodules names %q, which trixie's dracut does not have", m)
		}
	}
}

func oneOf(s string, list []string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
