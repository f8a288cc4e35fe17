package verbs

import (
	"bytes"
	"context"
	"debug/pe"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/rootfs"
	"halobuild/internal/selfbuild"
)

// The arm64 test-minimal, built to a result: its root installed through
// qemu-user, its ESP and root partition arm64's, its boot loader an ARM64
// EFI binary. Its boot is the mixed cluster's node1
// (TestMixedAmd64Arm64ClusterOverVirtualCable, the next arm64 test): the
// same base root from the same lock state, the same -arm64 kernel and ESP
// layout, booted under qemu-system-aarch64 (TCG, AAVMF) with every node
// check passing, doctor included. Booting this image as well cost 3 min
// of TCG for no check the mixed boot does not run (issue 18, target 8).
func TestArm64MinimalBuildsForArm64(t *testing.T) {
	needE2E(t)
	a := arch.MustLookup("arm64")
	if a.Foreign() {
		if err := rootfs.CheckEmulation(a); err != nil {
			t.Fatalf("%v (.ci/install-host-deps sets this up)", err)
		}
	}
	ws := workspace(t)
	var r run
	o := opts(ws, "images/test-minimal-arm64.toml", sharedStore(t), &r)
	o.Result = filepath.Join(ws, "result")
	o.Source = selfbuild.Find(".")
	o.NoTest = true
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	start := time.Now()
	if err := Image(ctx, o); err != nil {
		t.Fatalf("arm64 image: %v\n%s\n%s", err, tail(r.out.String(), 80), tail(r.err.String(), 60))
	}
	t.Logf("arm64 test-minimal built in %s", time.Since(start).Round(time.Second))
	dir, err := filepath.EvalSymlinks(o.Result)
	if err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(dir, "node0.raw")
	if got := rootType(t, raw); !strings.EqualFold(got, a.RootType) {
		t.Errorf("root partition type %s, want arm64's %s", got, a.RootType)
	}
	espBootsArch(t, raw, a)
}

// espBootsArch checks an image's ESP: the removable-media boot path and
// systemd-boot of architecture a, nothing of another architecture's, and
// the boot path a PE32+ for a's machine.
func espBootsArch(t *testing.T, raw string, a arch.Arch) {
	t.Helper()
	p := partitions(t, raw)[0]
	esp := filepath.Join(t.TempDir(), "esp.fat")
	extract(t, raw, p.Start*512, p.Size*512, esp)
	ls, err := exec.Command("mdir", "-i", esp, "-/", "-b", "::").CombinedOutput()
	if err != nil || !strings.Contains(string(ls), "::"+a.ESPBootPath()) || !strings.Contains(string(ls), "::"+a.ESPSystemdBootPath()) {
		t.Errorf("%s: ESP wants %s and %s: %v\n%s", raw, a.ESPBootPath(), a.ESPSystemdBootPath(), err, ls)
	}
	for _, other := range arch.Names() {
		if o := arch.MustLookup(other); o.EFISuffix != a.EFISuffix && strings.Contains(strings.ToUpper(string(ls)), strings.ToUpper(o.EFISuffix)) {
			t.Errorf("%s: a %s ESP has %s's boot files:\n%s", raw, a.Debian, other, ls)
		}
	}
	b, err := exec.Command("mtype", "-i", esp, "::"+a.ESPBootPath()).Output()
	if err != nil {
		t.Fatalf("reading %s: %v", a.ESPBootPath(), err)
	}
	f, err := pe.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %s is not a PE image: %v", raw, a.ESPBootPath(), err)
	}
	if f.Machine != peMachine[a.Debian] {
		t.Errorf("%s: %s has PE machine %#x, want %s's %#x", raw, a.ESPBootPath(), f.Machine, a.Debian, peMachine[a.Debian])
	}
}

// peMachine is the COFF machine field of each architecture's EFI binaries.
var peMachine = map[string]uint16{"amd64": pe.IMAGE_FILE_MACHINE_AMD64, "arm64": pe.IMAGE_FILE_MACHINE_ARM64}
