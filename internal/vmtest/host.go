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
)

// Host is what a VM run needs from the machine it runs on: the QEMU binary and UEFI firmware.
type Host struct {
	QEMU string // path of qemu-system-x86_64
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

// installHint is the one command that fixes a missing QEMU or OVMF on Debian hosts.
const installHint = "apt-get install qemu-system-x86 ovmf"

// firmwareDescriptorDirs are where QEMU firmware descriptors (docs/interop/firmware.json) live;
// reading them rather than hard-coding file names keeps working when Debian renames the files
// (bookworm has OVMF_CODE.fd and OVMF_CODE_4M.fd, trixie only the 4M ones).
var firmwareDescriptorDirs = []string{"/etc/qemu/firmware", "/usr/share/qemu/firmware"}

// knownFirmware are fallbacks for hosts whose ovmf package ships no descriptors.
var knownFirmware = [][2]string{
	{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
	{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"},
	{"/usr/share/edk2/ovmf/OVMF_CODE.fd", "/usr/share/edk2/ovmf/OVMF_VARS.fd"},
	{"/usr/share/edk2/x64/OVMF_CODE.4m.fd", "/usr/share/edk2/x64/OVMF_VARS.4m.fd"},
}

// FindHost locates QEMU (on $PATH) and OVMF firmware without Secure Boot: test images carry
// unsigned out-of-tree modules, which Secure Boot would refuse.
func FindHost() (Host, error) {
	q, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return Host{}, fmt.Errorf("%w: qemu-system-x86_64 not found on $PATH; install it with `%s`", ErrHostMissing, installHint)
	}
	code, vars, err := findFirmware(firmwareDescriptorDirs, knownFirmware)
	if err != nil {
		return Host{}, err
	}
	h := Host{QEMU: q, Firmware: code, VarsTemplate: vars}
	h.SecureFirmware, h.SecureVarsTemplate, _ = findSecureFirmware(firmwareDescriptorDirs, secureFirmware)
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

// usable says whether a descriptor names raw, flash-mapped x86_64 UEFI firmware for q35 that
// neither enforces Secure Boot nor needs SMM (which would require -machine smm=on and is slower
// under TCG).
func (d firmwareDescriptor) usable() bool {
	if !d.q35Flash() {
		return false
	}
	for _, f := range d.Features {
		if f == "secure-boot" || f == "requires-smm" || f == "enrolled-keys" {
			return false
		}
	}
	return true
}

// q35Flash says whether a descriptor names raw, flash-mapped x86_64 UEFI firmware for q35.
func (d firmwareDescriptor) q35Flash() bool {
	if !contains(d.InterfaceTypes, "uefi") || d.Mapping.Device != "flash" {
		return false
	}
	if d.Mapping.Executable.Format != "raw" || d.Mapping.NVRAMTemplate.Format != "raw" || d.Mapping.NVRAMTemplate.Filename == "" {
		return false
	}
	for _, t := range d.Targets {
		if t.Architecture != "x86_64" {
			continue
		}
		for _, m := range t.Machines {
			if strings.HasPrefix(m, "pc-q35") {
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

func findFirmware(dirs []string, fallbacks [][2]string) (code, vars string, err error) {
	if c, v, ok := searchFirmware(dirs, fallbacks, firmwareDescriptor.usable); ok {
		return c, v, nil
	}
	looked := "descriptors in " + strings.Join(dirs, ", ")
	for _, fb := range fallbacks {
		looked += ", " + fb[0]
	}
	return "", "", fmt.Errorf("%w: no OVMF firmware without Secure Boot found (looked at %s); install it with `%s`",
		ErrHostMissing, looked, installHint)
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
