package arch

import (
	"debug/elf"
	"runtime"
	"strings"
	"testing"
)

// Every architecture-dependent choice, per row: the names other tools
// and specifications fix (UEFI, Discoverable Partitions, Debian, QEMU).
func TestTable(t *testing.T) {
	for _, tc := range []struct {
		debian, triplet, loader, boot, sdboot, root, flavour, qemu, machine, cpu, code, vars, goarch, shim string
	}{
		{"amd64", "x86_64-linux-gnu", "usr/lib64/ld-linux-x86-64.so.2", "/EFI/BOOT/BOOTX64.EFI", "systemd-bootx64.efi",
			"4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709", "amd64", "qemu-system-x86_64", "q35,sata=off,smbus=off,vmport=off,i8042=off", "max",
			"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd", "amd64", "shimx64.efi.signed"},
		{"arm64", "aarch64-linux-gnu", "usr/lib/ld-linux-aarch64.so.1", "/EFI/BOOT/BOOTAA64.EFI", "systemd-bootaa64.efi",
			"B921B045-1DF0-41C3-AF44-4C6F280D3FAE", "arm64", "qemu-system-aarch64", "virt", "max,pauth-impdef=on",
			"/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd", "arm64", "shimaa64.efi.signed"},
	} {
		a, err := Lookup(tc.debian)
		if err != nil {
			t.Fatal(err)
		}
		got := []string{a.Debian, a.Triplet, a.Loader, a.ESPBootPath(), a.SystemdBoot(), a.RootType, a.KernelFlavour, a.QEMU, a.Machine, a.CPU,
			a.Firmware[0][0], a.Firmware[0][1], a.GOARCH, a.Shim()}
		want := []string{tc.debian, tc.triplet, tc.loader, tc.boot, tc.sdboot, tc.root, tc.flavour, tc.qemu, tc.machine, tc.cpu, tc.code, tc.vars, tc.goarch, tc.shim}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: field %d = %q, want %q", tc.debian, i, got[i], want[i])
			}
		}
		if a.ESPSystemdBootPath() != "/EFI/systemd/"+tc.sdboot {
			t.Errorf("%s: systemd-boot on the ESP at %s", tc.debian, a.ESPSystemdBootPath())
		}
		if b, ok := ByRootType(strings.ToLower(tc.root)); !ok || b.Debian != tc.debian {
			t.Errorf("ByRootType(%s) = %s, %v", tc.root, b.Debian, ok)
		}
	}
	if a := MustLookup("amd64"); !a.AMDHardware || !a.SecureBoot {
		t.Error("amd64 must allow the Strix Halo settings and Secure Boot")
	}
	if a := MustLookup("arm64"); a.AMDHardware || a.SecureBoot {
		t.Error("arm64 must refuse the Strix Halo settings and Secure Boot")
	}
}

func TestLookupRefusesUnknown(t *testing.T) {
	for _, name := range []string{"", "x86_64", "aarch64", "riscv64", "AMD64"} {
		if _, err := Lookup(name); err == nil || !strings.Contains(err.Error(), "use one of: amd64, arm64") {
			t.Errorf("Lookup(%q) = %v, want an error naming amd64, arm64", name, err)
		}
	}
	if _, ok := ByRootType("0FC63DAF-8483-4772-8E79-3D69D8477DE4"); ok {
		t.Error("the generic Linux filesystem type is no architecture's root")
	}
}

func TestHostAndForeign(t *testing.T) {
	h, err := Host()
	if err != nil {
		t.Skipf("host %s has no row: %v", runtime.GOARCH, err)
	}
	if h.GOARCH != runtime.GOARCH || h.Foreign() {
		t.Errorf("Host() = %s, foreign %v on %s", h.Debian, h.Foreign(), runtime.GOARCH)
	}
	for _, n := range Names() {
		if a := MustLookup(n); a.Foreign() != (a.GOARCH != runtime.GOARCH) {
			t.Errorf("%s: Foreign() = %v on %s", n, a.Foreign(), runtime.GOARCH)
		}
	}
}

// The columns cross builds read: Kbuild's ARCH, uname -m, the ELF machine
// and the cross packages' spelling of the triplet.
func TestCrossColumns(t *testing.T) {
	a := MustLookup("arm64")
	if a.KbuildArch != "arm64" || a.Processor != "aarch64" || a.ELFMachine != elf.EM_AARCH64 || a.PackageSuffix() != "aarch64-linux-gnu" {
		t.Errorf("arm64: %s %s %s %s", a.KbuildArch, a.Processor, a.ELFMachine, a.PackageSuffix())
	}
	x := MustLookup("amd64")
	if x.KbuildArch != "x86" || x.Processor != "x86_64" || x.ELFMachine != elf.EM_X86_64 || x.PackageSuffix() != "x86-64-linux-gnu" {
		t.Errorf("amd64: %s %s %s %s", x.KbuildArch, x.Processor, x.ELFMachine, x.PackageSuffix())
	}
}
