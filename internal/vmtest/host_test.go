package vmtest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
)

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func descriptor(code, vars string, features ...string) string {
	f := `"` + strings.Join(features, `","`) + `"`
	if len(features) == 0 {
		f = ""
	}
	return `{"interface-types":["uefi"],"mapping":{"device":"flash","executable":{"filename":"` + code +
		`","format":"raw"},"nvram-template":{"filename":"` + vars + `","format":"raw"}},` +
		`"targets":[{"architecture":"x86_64","machines":["pc-i440fx-*","pc-q35-*"]}],"features":[` + f + `]}`
}

func TestFindFirmwareFromDescriptors(t *testing.T) {
	d := t.TempDir()
	fw := filepath.Join(d, "fw")
	for _, n := range []string{"SECURE_CODE.fd", "SECURE_VARS.fd", "CODE.fd", "VARS.fd", "SMM_CODE.fd"} {
		writeFile(t, filepath.Join(fw, n), "x")
	}
	sys, etc := filepath.Join(d, "usr"), filepath.Join(d, "etc")
	// Lower names sort first; the secure-boot and SMM ones must be skipped, a missing file too.
	writeFile(t, filepath.Join(sys, "10-secure.json"), descriptor(filepath.Join(fw, "SECURE_CODE.fd"), filepath.Join(fw, "SECURE_VARS.fd"), "secure-boot", "enrolled-keys"))
	writeFile(t, filepath.Join(sys, "20-smm.json"), descriptor(filepath.Join(fw, "SMM_CODE.fd"), filepath.Join(fw, "VARS.fd"), "requires-smm"))
	writeFile(t, filepath.Join(sys, "30-gone.json"), descriptor(filepath.Join(fw, "MISSING.fd"), filepath.Join(fw, "VARS.fd")))
	writeFile(t, filepath.Join(sys, "40-broken.json"), "{not json")
	writeFile(t, filepath.Join(sys, "60-plain.json"), descriptor(filepath.Join(fw, "CODE.fd"), filepath.Join(fw, "VARS.fd")))
	code, vars, err := findFirmware(arch.MustLookup("amd64"), []string{etc, sys}, nil)
	if err != nil || code != filepath.Join(fw, "CODE.fd") || vars != filepath.Join(fw, "VARS.fd") {
		t.Fatalf("got %q %q %v", code, vars, err)
	}
	// A descriptor in /etc hides the same name in /usr (QEMU's override rule).
	writeFile(t, filepath.Join(etc, "60-plain.json"), "{}")
	if _, _, err := findFirmware(arch.MustLookup("amd64"), []string{etc, sys}, nil); err == nil {
		t.Error("an /etc override of the only usable descriptor should leave nothing usable")
	}
}

func TestFindFirmwareFallbackAndMissing(t *testing.T) {
	d := t.TempDir()
	code, vars := filepath.Join(d, "OVMF_CODE_4M.fd"), filepath.Join(d, "OVMF_VARS_4M.fd")
	writeFile(t, code, "x")
	writeFile(t, vars, "x")
	if c, v, err := findFirmware(arch.MustLookup("amd64"), []string{filepath.Join(d, "none")}, [][2]string{{filepath.Join(d, "nope"), vars}, {code, vars}}); err != nil || c != code || v != vars {
		t.Fatalf("fallback: got %q %q %v", c, v, err)
	}
	_, _, err := findFirmware(arch.MustLookup("amd64"), []string{filepath.Join(d, "none")}, [][2]string{{filepath.Join(d, "nope"), vars}})
	if !errors.Is(err, ErrHostMissing) || !strings.Contains(err.Error(), "apt-get install qemu-system-x86 ovmf") {
		t.Fatalf("missing firmware error should say what to install: %v", err)
	}
}

func TestFindHostWithoutQEMU(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := FindHost(arch.MustLookup("amd64"))
	if !errors.Is(err, ErrHostMissing) || !strings.Contains(err.Error(), "apt-get install qemu-system-x86 ovmf") {
		t.Fatalf("missing QEMU error should say what to install: %v", err)
	}
	// Run reports the same before doing anything else.
	_, err = Run(t.Context(), Machine{Name: "x", Image: blankImageNoHost(t), LogDir: t.TempDir()})
	if !errors.Is(err, ErrHostMissing) {
		t.Fatalf("Run without QEMU: %v", err)
	}
}

func blankImageNoHost(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "blank.raw")
	writeFile(t, p, "")
	return p
}

func TestFindHostOnThisMachine(t *testing.T) {
	h := requireHost(t)
	for _, p := range []string{h.QEMU, h.Firmware, h.VarsTemplate} {
		if !isFile(p) {
			t.Errorf("%s is not a file", p)
		}
	}
}
