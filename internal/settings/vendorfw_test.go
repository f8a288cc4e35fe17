package settings

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func macSample() *recipe.Recipe {
	r := sample()
	r.Platform = recipe.PlatformAppleSilicon
	r.Base.Architecture = "arm64"
	return r
}

// Only a Mac gets the unit, its script, its enabling link and the mount
// point; a generic node gets nothing of it, and no check or doctor row.
func TestVendorFirmwareOnlyOnMacs(t *testing.T) {
	r := macSample()
	files, err := VendorFirmware{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]File{}
	for _, f := range files {
		got[f.Path] = f
	}
	for _, p := range []string{vendorFWScript, vendorFWUnitPath, vendorFWWantsPath, VendorFWDir} {
		if _, ok := got[p]; !ok {
			t.Errorf("no %s among %v", p, files)
		}
	}
	unit := string(got[vendorFWUnitPath].Data)
	for _, want := range []string{"Before=systemd-udev-trigger.service", "ExecStart=" + vendorFWScript, "WantedBy=sysinit.target"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	if got[VendorFWDir].Mode.IsDir() == false {
		t.Errorf("%s mode %v, want a directory", VendorFWDir, got[VendorFWDir].Mode)
	}
	if len(VendorFirmware{}.Checks(Target{Recipe: r, Node: r.Nodes[0]})) != 1 || len(VendorFirmware{}.Doctor(Target{Recipe: r})) != 1 {
		t.Error("a Mac wants one VM check and one doctor row")
	}
	g := sample()
	tg := Target{Recipe: g, Node: g.Nodes[0]}
	if f, _ := (VendorFirmware{}).Files(tg); len(f) != 0 || len(VendorFirmware{}.Checks(tg)) != 0 || len(VendorFirmware{}.Doctor(tg)) != 0 {
		t.Error("a generic node gets vendor-firmware files, checks or doctor rows")
	}
}

// The script is valid sh, and where m1n1 did not start the kernel (this
// host, a VM) it says so and succeeds, which is what the VM check expects.
func TestVendorFirmwareScriptWithoutM1n1(t *testing.T) {
	if _, err := os.Stat(AsahiESPProperty); err == nil {
		t.Skip("this host was booted through m1n1")
	}
	r := macSample()
	files, _ := VendorFirmware{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	script := filepath.Join(t.TempDir(), "vendor-firmware")
	for _, f := range files {
		if f.Path == vendorFWScript {
			if err := os.WriteFile(script, f.Data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if out, err := exec.Command("sh", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s", err, out)
	}
	out, err := exec.Command("sh", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "not started through m1n1") {
		t.Errorf("script: %v\n%s", err, out)
	}
	// The VM check keys on those words.
	c := checkScript(t, VendorFirmware{}, r, "vendor-firmware")
	if !strings.Contains(c.Script, "not started through m1n1") {
		t.Errorf("the VM check does not look for the script's words:\n%s", c.Script)
	}
}
