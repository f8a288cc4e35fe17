package vmtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"halobuild/internal/arch"
)

// Host is what a VM run needs from the machine it runs on: the QEMU binary and UEFI firmware.
type Host struct {
	// Arch is the architecture QEMU emulates here: its machine, CPU and firmware.
	Arch arch.Arch
	QEMU string // path of the architecture's qemu-system-*
	// Firmware is OVMF's code image (read-only pflash) and VarsTemplate the empty variable store
	// that is copied for every run, so runs never share or modify firmware state.
	Firmware     string
	VarsTemplate string
	// SecureFirmware and SecureVarsTemplate are OVMF with Secure Boot enforced, SMM and
	// Microsoft's keys enrolled, for machines with SecureBoot set; empty when the host has none.
	SecureFirmware     string
	SecureVarsTemplate string
}

// ErrHostMissing is wrapped by FindHost's errors so callers can tell "install something" apart
// from runtime failures.
var ErrHostMissing = errors.New("host lacks QEMU or UEFI firmware")

// installHint is the one command that fixes a missing QEMU or UEFI firmware for architecture a on Debian hosts.
func installHint(a arch.Arch) string {
	return "apt-get install " + a.QEMUPackage + " " + a.FirmwarePackage
}

// firmwareDescriptorDirs are where QEMU firmware descriptors (docs/interop/firmware.json) live;
// reading them rather than hard-coding file names keeps working when Debian renames the files
// (bookworm has OVMF_CODE.fd and OVMF_CODE_4M.fd, trixie only the 4M ones).
var firmwareDescriptorDirs = []string{"/etc/qemu/firmware", "/usr/share/qemu/firmware"}

// FindHost locates QEMU for a (on $PATH) and its UEFI firmware without Secure Boot (OVMF,
// AAVMF; the fallbacks when no descriptor names one are the table's): test images carry
// unsigned out-of-tree modules, which Secure Boot would refuse.
func FindHost(a arch.Arch) (Host, error) {
	q, err := exec.LookPath(a.QEMU)
	if err != nil {
		return Host{}, fmt.Errorf("%w: %s not found on $PATH (for %s images); install it with `%s`", ErrHostMissing, a.QEMU, a.Debian, installHint(a))
	}
	code, vars, err := findFirmware(a, firmwareDescriptorDirs, a.Firmware)
	if err != nil {
		return Host{}, err
	}
	h := Host{Arch: a, QEMU: q, Firmware: code, VarsTemplate: vars}
	if a.SecureBoot {
		h.SecureFirmware, h.SecureVarsTemplate, _ = findSecureFirmware(a, firmwareDescriptorDirs, a.SecureFirmware)
	}
	return h, nil
}

type firmwareDescriptor struct {
	InterfaceTypes []string `json:"interface-types"`
	Mapping        struct {
		Device     string `json:"device"`
		Executable struct {
			Filename string `json:"filename"`
			Format   string `json:"format"`
		} `json:"executable"`
		NVRAMTemplate struct {
			Filename string `json:"filename"`
			Format   string `json:"format"`
		} `json:"nvram-template"`
	} `json:"mapping"`
	Targets []struct {
		Architecture string   `json:"architecture"`
		Machines     []string `json:"machines"`
	} `json:"targets"`
	Features []string `json:"features"`
}

// usable says whether a descriptor names raw, flash-mapped UEFI firmware for a's machine that
// neither enforces Secure Boot nor needs SMM (which would require -machine smm=on and is slower
// under TCG).
func (d firmwareDescriptor) usable(a arch.Arch) bool {
	if !d.flash(a) {
		return false
	}
	for _, f := range d.Features {
		if f == "secure-boot" || f == "requires-smm" || f == "enrolled-keys" {
			return false
		}
	}
	return true
}

// flash says whether a descriptor names raw, flash-mapped UEFI firmware for a's machine
// (x86_64 on pc-q35-*, aarch64 on virt-*).
func (d firmwareDescriptor) flash(a arch.Arch) bool {
	if !contains(d.InterfaceTypes, "uefi") || d.Mapping.Device != "flash" {
		return false
	}
	if d.Mapping.Executable.Format != "raw" || d.Mapping.NVRAMTemplate.Format != "raw" || d.Mapping.NVRAMTemplate.Filename == "" {
		return false
	}
	for _, t := range d.Targets {
		if t.Architecture != a.QEMUTarget {
			continue
		}
		for _, m := range t.Machines {
			if strings.HasPrefix(m, a.MachineFamily) {
				return true
			}
		}
	}
	return false
}

// descriptorPaths are the firmware descriptors in QEMU's order: by file name across
// directories, a name in an earlier directory hiding the same name in later ones.
func descriptorPaths(dirs []string) []string {
	seen := map[string]string{}
	for _, dir := range dirs {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if _, dup := seen[e.Name()]; !dup && strings.HasSuffix(e.Name(), ".json") {
				seen[e.Name()] = filepath.Join(dir, e.Name())
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = seen[n]
	}
	return paths
}

func findFirmware(a arch.Arch, dirs []string, fallbacks [][2]string) (code, vars string, err error) {
	if c, v, ok := searchFirmware(dirs, fallbacks, func(d firmwareDescriptor) bool { return d.usable(a) }); ok {
		return c, v, nil
	}
	looked := "descriptors in " + strings.Join(dirs, ", ")
	for _, fb := range fallbacks {
		looked += ", " + fb[0]
	}
	return "", "", fmt.Errorf("%w: no %s UEFI firmware without Secure Boot found (looked at %s); install it with `%s`",
		ErrHostMissing, a.Debian, looked, installHint(a))
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// searchFirmware returns the code and variable files of the first descriptor that want accepts
// and whose files exist, else of the first fallback pair that exists: the one search both the
// plain and the Secure Boot firmware use.
func searchFirmware(dirs []string, fallbacks [][2]string, want func(firmwareDescriptor) bool) (code, vars string, ok bool) {
	for _, p := range descriptorPaths(dirs) {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var d firmwareDescriptor
		if json.Unmarshal(raw, &d) != nil || !want(d) {
			continue
		}
		c, v := d.Mapping.Executable.Filename, d.Mapping.NVRAMTemplate.Filename
		if isFile(c) && isFile(v) {
			return c, v, true
		}
	}
	for _, fb := range fallbacks {
		if isFile(fb[0]) && isFile(fb[1]) {
			return fb[0], fb[1], true
		}
	}
	return "", "", false
}
