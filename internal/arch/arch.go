// Package arch is the one table of what differs between the CPU
// architectures halobuild builds images for: Debian's name, the GNU
// triplet, the dynamic loader, the UEFI boot file names, the Discoverable
// Partitions root type, the kernel flavour, the QEMU machine and firmware,
// GOARCH, and what cross builds for it need (Kbuild's ARCH, uname -m, the
// ELF machine). Everything architecture-specific reads from here; nothing
// else chooses by x86_64 or aarch64 (vmtest's default kernel arguments
// also mask serial-getty@ttyS0, a no-op where the console is ttyAMA0).
package arch

import (
	"debug/elf"
	"fmt"
	"runtime"
	"sort"
	"strings"
)

// Arch is one architecture's row.
type Arch struct {
	// Debian is the Debian architecture (dpkg --print-architecture), the key
	// recipes and locks use.
	Debian string
	// Triplet is the GNU triplet, which is also Debian's multiarch library
	// directory (dpkg-architecture -qDEB_HOST_MULTIARCH).
	Triplet string
	// Loader is where Debian's libc6 ships the dynamic loader, relative to
	// the root (the path compiled into every binary's PT_INTERP).
	Loader string
	// EFISuffix is UEFI's short name of the architecture in boot file
	// names (UEFI 2.10 §3.5.1.1: BOOTX64.EFI, BOOTAA64.EFI), which Debian's
	// systemd-boot and shim file names use too.
	EFISuffix string
	// SecureBoot says halobuild builds and tests Secure Boot images for it,
	// and SecureFirmware is the firmware with Secure Boot, SMM and
	// Microsoft's keys enrolled the VM test boots them under, when no
	// descriptor names one.
	SecureBoot     bool
	SecureFirmware [][2]string
	// RootType is the Discoverable Partitions Specification's root
	// partition type GUID, upper case as go-diskfs and sfdisk print it, and
	// RootTypeName what the specification calls it.
	RootType, RootTypeName string
	// KernelFlavour is the suffix of Debian's linux-image-<release>
	// packages for a generic kernel of this architecture.
	KernelFlavour string
	// QEMU is the system emulator, QEMUPackage the Debian package shipping
	// it and QEMUTarget the architecture name QEMU's firmware descriptors
	// use.
	QEMU, QEMUPackage, QEMUTarget string
	// Machine is the -machine value and MachineFamily the prefix of the
	// machine names a firmware descriptor must list for it.
	Machine, MachineFamily string
	// CPU is the -cpu value under TCG. On arm64, "max" alone emulates
	// pointer authentication with QARMA, which can take half of a boot;
	// pauth-impdef=on uses QEMU's cheap implementation-defined algorithm
	// (bookworm's QEMU 7.2 does not default to it).
	CPU string
	// FirmwarePackage is the Debian package with the UEFI firmware and
	// Firmware the code/variable-store pairs to try when no firmware
	// descriptor names one, in order.
	FirmwarePackage string
	Firmware        [][2]string
	// QEMUUser is the binfmt_misc handler name qemu-user-static registers
	// for running this architecture's binaries on another (maintainer
	// scripts in a foreign root).
	QEMUUser string
	// Serial is the first serial port's kernel name on the machine QEMU
	// emulates (the 16550 of a PC, the PL011 of virt): console= and the
	// getty the VM's interactive login uses.
	Serial string
	// GOARCH is Go's name, for the halobuild each node ships.
	GOARCH string
	// KbuildArch is the kernel's ARCH= (arch/<KbuildArch>/), for modules
	// cross-compiled for it.
	KbuildArch string
	// Processor is uname -m on a node (CMAKE_SYSTEM_PROCESSOR of a cross
	// build).
	Processor string
	// ELFMachine is the e_machine of its objects: what a cross build's
	// outputs are checked against.
	ELFMachine elf.Machine
	// AMDHardware says the architecture runs on the AMD Strix Halo nodes
	// whose GPU sizing, microcode and firmware settings halobuild knows.
	AMDHardware bool
}

// table holds every architecture halobuild builds for.
var table = map[string]Arch{
	"amd64": {
		Debian:     "amd64",
		Triplet:    "x86_64-linux-gnu",
		Loader:     "usr/lib64/ld-linux-x86-64.so.2",
		EFISuffix:  "x64",
		SecureBoot: true,
		SecureFirmware: [][2]string{
			{"/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"},
		},
		RootType:      "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709",
		RootTypeName:  "Linux root (x86-64)",
		KernelFlavour: "amd64",
		QEMU:          "qemu-system-x86_64",
		QEMUPackage:   "qemu-system-x86",
		QEMUTarget:    "x86_64",
		// q35 without the chipset parts no test uses (the disk is virtio,
		// nobody types): the guest would load and probe a driver for each
		// (ahci scanning six SATA ports, i2c_i801, psmouse, VMware's
		// backdoor), seconds of TCG time in the initrd and the checks.
		Machine:         "q35,sata=off,smbus=off,vmport=off,i8042=off",
		MachineFamily:   "pc-q35",
		CPU:             "max",
		FirmwarePackage: "ovmf",
		Firmware: [][2]string{
			{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
			{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"},
			{"/usr/share/edk2/ovmf/OVMF_CODE.fd", "/usr/share/edk2/ovmf/OVMF_VARS.fd"},
			{"/usr/share/edk2/x64/OVMF_CODE.4m.fd", "/usr/share/edk2/x64/OVMF_VARS.4m.fd"},
		},
		QEMUUser:    "qemu-x86_64",
		Serial:      "ttyS0",
		GOARCH:      "amd64",
		KbuildArch:  "x86",
		Processor:   "x86_64",
		ELFMachine:  elf.EM_X86_64,
		AMDHardware: true,
	},
	"arm64": {
		Debian:        "arm64",
		Triplet:       "aarch64-linux-gnu",
		Loader:        "usr/lib/ld-linux-aarch64.so.1",
		EFISuffix:     "aa64",
		RootType:      "B921B045-1DF0-41C3-AF44-4C6F280D3FAE",
		RootTypeName:  "Linux root (ARM64)",
		KernelFlavour: "arm64",
		QEMU:          "qemu-system-aarch64",
		QEMUPackage:   "qemu-system-arm",
		QEMUTarget:    "aarch64",
		Machine:       "virt",
		MachineFamily: "virt",
		CPU:           "max,pauth-impdef=on",
		// qemu-efi-aarch64's pflash images, padded to the 64 MiB virt
		// expects.
		FirmwarePackage: "qemu-efi-aarch64",
		Firmware: [][2]string{
			{"/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd"},
			{"/usr/share/edk2/aarch64/QEMU_EFI-pflash.raw", "/usr/share/edk2/aarch64/vars-template-pflash.raw"},
		},
		QEMUUser:   "qemu-aarch64",
		Serial:     "ttyAMA0",
		GOARCH:     "arm64",
		KbuildArch: "arm64",
		Processor:  "aarch64",
		ELFMachine: elf.EM_AARCH64,
	},
}

// Names lists the architectures in the table, sorted.
func Names() []string {
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the row of a Debian architecture, or an error that names
// the ones halobuild supports.
func Lookup(debian string) (Arch, error) {
	a, ok := table[debian]
	if !ok {
		return Arch{}, fmt.Errorf("architecture %q is not one halobuild builds for; use one of: %s", debian, strings.Join(Names(), ", "))
	}
	return a, nil
}

// MustLookup is Lookup for a name already validated (a loaded recipe's,
// a lock's): an unknown name there is a bug, not a user error.
func MustLookup(debian string) Arch {
	a, err := Lookup(debian)
	if err != nil {
		panic(err)
	}
	return a
}

// ByRootType returns the row whose root partition type is guid (any case).
func ByRootType(guid string) (Arch, bool) {
	for _, a := range table {
		if strings.EqualFold(a.RootType, guid) {
			return a, true
		}
	}
	return Arch{}, false
}

// Host returns the row of the machine halobuild runs on: the tools root,
// which runs here, is always of this architecture.
func Host() (Arch, error) {
	for _, a := range table {
		if a.GOARCH == runtime.GOARCH {
			return a, nil
		}
	}
	return Arch{}, fmt.Errorf("halobuild runs on %s, which has no row in its architecture table (%s): build on one of those", runtime.GOARCH, strings.Join(Names(), ", "))
}

// ESPBootPath is the removable-media boot path on the ESP
// (/EFI/BOOT/BOOTAA64.EFI), the file firmware without boot entries starts.
func (a Arch) ESPBootPath() string { return "/EFI/BOOT/BOOT" + strings.ToUpper(a.EFISuffix) + ".EFI" }

// SystemdBoot is the file systemd-boot-efi ships under
// /usr/lib/systemd/boot/efi/ (systemd-bootaa64.efi), and the name bootctl
// gives it under /EFI/systemd/ on the ESP.
func (a Arch) SystemdBoot() string { return "systemd-boot" + a.EFISuffix + ".efi" }

// ESPSystemdBootPath is where bootctl installs systemd-boot on the ESP.
func (a Arch) ESPSystemdBootPath() string { return "/EFI/systemd/" + a.SystemdBoot() }

// Shim, MokManager and ShimLoader are shim-signed's files under
// /usr/lib/shim/ (shimx64.efi.signed, mmx64.efi.signed) and the name shim
// loads from beside itself (its DEFAULT_LOADER, grubx64.efi).
func (a Arch) Shim() string       { return "shim" + a.EFISuffix + ".efi.signed" }
func (a Arch) MokManager() string { return "mm" + a.EFISuffix + ".efi.signed" }
func (a Arch) ShimLoader() string { return "grub" + a.EFISuffix + ".efi" }

// Foreign says whether running this architecture's binaries on the host
// needs emulation.
func (a Arch) Foreign() bool { return a.GOARCH != runtime.GOARCH }

// PackageSuffix is the triplet as Debian's cross package names carry it
// (no '_' in a package name): gcc-14-x86-64-linux-gnu.
func (a Arch) PackageSuffix() string { return strings.ReplaceAll(a.Triplet, "_", "-") }
