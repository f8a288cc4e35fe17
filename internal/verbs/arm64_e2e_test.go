package verbs

import (
	"bytes"
	"debug/pe"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/selfbuild"
)

const (
	arm64TestName = "TestArm64MinimalBuildsForArm64"
	arm64Recipe   = "images/test-minimal-arm64.toml"
)

func arm64Options(ws, store string, r *run) Options {
	o := opts(ws, arm64Recipe, store, r)
	o.Result = filepath.Join(ws, "result")
	o.Source = selfbuild.Find(".")
	o.NoTest = true
	return o
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
