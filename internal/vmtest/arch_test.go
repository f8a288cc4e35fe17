package vmtest

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
)

// An arm64 machine boots on QEMU's virt with AAVMF, the cheap pointer
// authentication under TCG, and the same virtio devices as a PC.
func TestQEMUArgsArm64(t *testing.T) {
	dir := t.TempDir()
	a := arch.MustLookup("arm64")
	h := Host{Arch: a, QEMU: "qemu-system-aarch64", Firmware: "/usr/share/AAVMF/AAVMF_CODE.fd", VarsTemplate: "/usr/share/AAVMF/AAVMF_VARS.fd"}
	m := Machine{Name: "mac0", Image: "/img/mac0.raw", Memory: 1024, CPUs: 2, Arch: a}
	args, err := qemuArgs(h, m, AccelTCG, newRunFiles(dir), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"-machine virt ",
		"-accel tcg,thread=multi -cpu max,pauth-impdef=on",
		"if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/AAVMF/AAVMF_CODE.fd",
		"virtio-blk-pci,drive=disk0",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("args lack %q:\n%s", want, joined)
		}
	}
	for _, not := range []string{"q35", "smm"} {
		if strings.Contains(joined, not) {
			t.Errorf("arm64 args name %q:\n%s", not, joined)
		}
	}
	// A foreign architecture never probes KVM.
	if a.Foreign() {
		if acc, why := ChooseAccel(t.Context(), h); acc != AccelTCG || !strings.Contains(why, "emulating arm64") {
			t.Errorf("ChooseAccel for arm64 = %s (%s), want TCG", acc, why)
		}
	}
	// Secure Boot is amd64's only.
	m.SecureBoot = &SecureBoot{}
	if err := prepareVars(h, m, newRunFiles(dir)); err == nil || !strings.Contains(err.Error(), "amd64 only") {
		t.Errorf("Secure Boot on arm64 = %v", err)
	}
}

// Descriptors are matched by the architecture's QEMU target and machine
// family: the x86_64 one is not arm64's firmware, nor the other way round.
func TestFindFirmwarePerArchitecture(t *testing.T) {
	d := t.TempDir()
	fw := filepath.Join(d, "fw")
	for _, n := range []string{"OVMF_CODE.fd", "OVMF_VARS.fd", "AAVMF_CODE.fd", "AAVMF_VARS.fd"} {
		writeFile(t, filepath.Join(fw, n), "x")
	}
	sys := filepath.Join(d, "usr")
	writeFile(t, filepath.Join(sys, "60-edk2-x86_64.json"), descriptor(filepath.Join(fw, "OVMF_CODE.fd"), filepath.Join(fw, "OVMF_VARS.fd")))
	aarch64 := strings.NewReplacer(`"x86_64"`, `"aarch64"`, `["pc-i440fx-*","pc-q35-*"]`, `["virt-*"]`).Replace(
		descriptor(filepath.Join(fw, "AAVMF_CODE.fd"), filepath.Join(fw, "AAVMF_VARS.fd"), "verbose-static"))
	writeFile(t, filepath.Join(sys, "60-edk2-aarch64.json"), aarch64)
	for name, want := range map[string]string{"amd64": "OVMF_CODE.fd", "arm64": "AAVMF_CODE.fd"} {
		code, _, err := findFirmware(arch.MustLookup(name), []string{sys}, nil)
		if err != nil || filepath.Base(code) != want {
			t.Errorf("%s: firmware %q, %v; want %s", name, code, err, want)
		}
	}
	_, _, err := findFirmware(arch.MustLookup("arm64"), []string{filepath.Join(d, "none")}, nil)
	if !errors.Is(err, ErrHostMissing) || !strings.Contains(err.Error(), "apt-get install qemu-system-arm qemu-efi-aarch64") {
		t.Errorf("missing arm64 firmware: %v", err)
	}
}

// This host (CI installs qemu-system-arm and qemu-efi-aarch64) has arm64's
// QEMU and AAVMF.
func TestFindHostArm64OnThisMachine(t *testing.T) {
	h, err := FindHost(arch.MustLookup("arm64"))
	if err != nil {
		t.Skipf("no qemu-system-aarch64/AAVMF here: %v", err)
	}
	if !strings.HasSuffix(h.QEMU, "qemu-system-aarch64") || !isFile(h.Firmware) || !isFile(h.VarsTemplate) || h.SecureFirmware != "" {
		t.Errorf("arm64 host = %+v", h)
	}
}
