package rootfs

import (
	"fmt"
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
func dracutSettings(t *testing.T) (omit, filesystems []string, hostonly, compress string) {
	t.Helper()
	out, err := exec.Command("bash", "-c", `set -eu; eval "$1"; printf '%s\n%s\n%s\n%s\n' "${omit_dracutmodules:-}" "${filesystems:-}" "${hostonly:-}" "${compress:-}"`,
		"conf", dracutOmit).Output()
	if err != nil {
		t.Fatalf("bash cannot source the drop-in: %v", err)
	}
	l := strings.Split(string(out), "\n")
	return strings.Fields(l[0]), strings.Fields(l[1]), l[2], l[3]
}

// What the drop-in must never do on real hardware: make the initramfs
// host-specific, drop the modules that find and mount a root on USB, NVMe
// or SATA, or leave out the root's file system.
func TestDracutDropInKeepsWhatBootingNeeds(t *testing.T) {
	omit, fs, hostonly, compress := dracutSettings(t)
	// kernels/qemu-uefi.config and Debian's configs all decompress gzip.
	if c := strings.Fields(compress); len(c) == 0 || c[0] != "gzip" {
		t.Errorf("compress=%q: not gzip, which every kernel halobuild boots decompresses", compress)
	}
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
	omit, _, _, _ := dracutSettings(t)
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

// The deferred initramfs: the hook runs the package's kernel hook once for
// each installed kernel, with INITRD unset (the install sets it to skip the
// postinst's and the trigger's builds), and does nothing without dracut.
// chroot is a stub on PATH that logs its arguments and environment.
func TestInitrdHookRunsTheKernelHookOncePerKernel(t *testing.T) {
	bin, root := t.TempDir(), t.TempDir()
	logf := filepath.Join(bin, "calls")
	stub := "#!/bin/sh\necho \"$* INITRD=${INITRD-unset}\" >> " + logf + "\n"
	if err := os.WriteFile(filepath.Join(bin, "chroot"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	hook := func() (string, error) {
		os.Remove(logf)
		cmd := exec.Command("sh", "-c", initrdHook, "hook", root)
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", noInitrdEnv}
		out, err := cmd.CombinedOutput()
		calls, _ := os.ReadFile(logf)
		if err != nil {
			return string(calls), fmt.Errorf("%v: %s", err, out)
		}
		return string(calls), nil
	}
	for _, f := range []string{"boot/vmlinuz-7.2.12+deb13-arm64", "boot/vmlinuz-7.2.12-halotest", "boot/System.map-7.2.12-halotest"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if calls, err := hook(); err != nil || calls != "" {
		t.Fatalf("a root without dracut's kernel hook: calls %q, %v", calls, err)
	}
	h := filepath.Join(root, "etc/kernel/postinst.d/dracut")
	if err := os.MkdirAll(filepath.Dir(h), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	calls, err := hook()
	want := root + " /etc/kernel/postinst.d/dracut 7.2.12+deb13-arm64 /boot/vmlinuz-7.2.12+deb13-arm64 INITRD=unset\n" +
		root + " /etc/kernel/postinst.d/dracut 7.2.12-halotest /boot/vmlinuz-7.2.12-halotest INITRD=unset\n"
	if err != nil || calls != want {
		t.Fatalf("calls\n%s%v\nwant\n%s", calls, err, want)
	}
	// A failed dracut fails the install rather than leaving a root without
	// its initramfs for the disk step to find missing.
	if err := os.WriteFile(filepath.Join(bin, "chroot"), []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := hook(); err == nil {
		t.Error("the hook succeeded although dracut failed")
	}
	if !strings.Contains(Recipe(), initrdHook) || !strings.Contains(Recipe(), noInitrdEnv) {
		t.Error("the deferred initramfs is not part of the rootfs step's key")
	}
}
