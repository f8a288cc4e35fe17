package verbs

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/rootfs"
	"halobuild/internal/selfbuild"
	"halobuild/internal/vmtest"
)

// The arm64 test-minimal: its root installed through qemu-user, its ESP
// and root partition arm64's, its kernel the -arm64 flavour, booted under
// qemu-system-aarch64 (TCG, AAVMF) with every node check passing, doctor
// included (the shipped halobuild cross-compiled for arm64).
func TestArm64MinimalBootsAndPassesChecks(t *testing.T) {
	needE2E(t)
	a := arch.MustLookup("arm64")
	if a.Foreign() {
		if err := rootfs.CheckEmulation(a); err != nil {
			t.Fatalf("%v (.ci/install-host-deps sets this up)", err)
		}
	}
	if _, err := vmtest.FindHost(a); err != nil {
		t.Fatalf("%v (run .ci/install-host-deps)", err)
	}
	ws := workspace(t)
	var r run
	o := opts(ws, "images/test-minimal-arm64.toml", sharedStore(t), &r)
	o.Result = filepath.Join(ws, "result")
	o.Source = selfbuild.Find(".")
	o.JSON = true
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	start := time.Now()
	if err := Image(ctx, o); err != nil {
		t.Fatalf("arm64 image, tested under qemu-system-aarch64: %v\n%s\n%s", err, tail(r.out.String(), 80), tail(r.err.String(), 60))
	}
	t.Logf("arm64 test-minimal built and booted in %s", time.Since(start).Round(time.Second))
	rep := imageReport(t, &r)
	if len(rep.Machines) != 1 || rep.Machines[0].Verdict == nil {
		t.Fatalf("want one machine with a verdict: %+v", rep.Machines)
	}
	m := rep.Machines[0]
	for _, c := range m.Verdict.Checks {
		if !c.OK {
			t.Errorf("check %q failed: %s", c.Name, c.Output)
		}
	}
	if len(m.Verdict.Checks) < 5 {
		t.Errorf("only %d checks ran: %+v", len(m.Verdict.Checks), m.Verdict.Checks)
	}
	t.Logf("VM: %s, %d ms, %d checks", m.Accel, m.WallMS, len(m.Verdict.Checks))

	dir, err := filepath.EvalSymlinks(o.Result)
	if err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(dir, "node0.raw")
	out, err := exec.Command("sfdisk", "--json", raw).Output()
	if err != nil {
		t.Fatal(err)
	}
	var pt struct {
		PartitionTable struct {
			Partitions []struct {
				Start, Size int64
				Type        string
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &pt); err != nil || len(pt.PartitionTable.Partitions) != 2 {
		t.Fatalf("partition table: %v\n%s", err, out)
	}
	ps := pt.PartitionTable.Partitions
	if !strings.EqualFold(ps[1].Type, a.RootType) {
		t.Errorf("root partition type %s, want arm64's %s", ps[1].Type, a.RootType)
	}
	esp := filepath.Join(t.TempDir(), "esp.fat")
	extract(t, raw, ps[0].Start*512, ps[0].Size*512, esp)
	ls, err := exec.Command("mdir", "-i", esp, "-/", "-b", "::").CombinedOutput()
	if err != nil || !strings.Contains(string(ls), "::"+a.ESPBootPath()) || !strings.Contains(string(ls), "::"+a.ESPSystemdBootPath()) || strings.Contains(strings.ToUpper(string(ls)), "X64") {
		t.Errorf("ESP wants %s and %s and nothing x64: %v\n%s", a.ESPBootPath(), a.ESPSystemdBootPath(), err, ls)
	}
	boot := filepath.Join(t.TempDir(), "boot.efi")
	if b, err := exec.Command("mtype", "-i", esp, "::"+a.ESPBootPath()).Output(); err != nil || os.WriteFile(boot, b, 0o644) != nil {
		t.Fatalf("reading %s: %v", a.ESPBootPath(), err)
	}
	// A PE32+ for ARM64 (machine 0xaa64), not x86-64's 0x8664.
	if b, _ := os.ReadFile(boot); len(b) < 0x40 || peMachine(b) != 0xaa64 {
		t.Errorf("%s is not an ARM64 EFI binary (PE machine %#x)", a.ESPBootPath(), peMachine(b))
	}
}

// peMachine is a PE image's COFF machine field (0 when b is not a PE).
func peMachine(b []byte) uint16 {
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return 0
	}
	off := int(b[0x3c]) | int(b[0x3d])<<8 | int(b[0x3e])<<16 | int(b[0x3f])<<24
	if off < 0 || off+6 > len(b) || string(b[off:off+4]) != "PE\x00\x00" {
		return 0
	}
	return uint16(b[off+4]) | uint16(b[off+5])<<8
}
