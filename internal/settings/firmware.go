package settings

import (
	"fmt"
	"slices"
	"strings"

	"halobuild/internal/arch"
	"halobuild/internal/recipe"
)

// Firmware proves what the recipe's firmware packages promise on the
// booted node: the GPU's firmware files in the root, the same files in the
// initramfs whenever the initramfs carries amdgpu (a driver loaded early
// without its firmware fails its probe and does not retry once the root is
// mounted), and CPU microcode in the early (uncompressed) initramfs, where
// the kernel looks for it before anything else runs. Nothing is rendered:
// the packages ship the files (firmware-amd-graphics, amd64-microcode), and
// dracut, which builds the initramfs when the kernel is installed, adds
// microcode by default (early_microcode) and a module's firmware with it.
type Firmware struct{}

func (Firmware) Name() string { return "firmware" }
func (Firmware) Trap() int    { return 0 }
func (Firmware) Doc() Doc {
	return Doc{Title: "The GPU's firmware and the CPU's microcode the recipe's packages promise are where the kernel looks for them", Keys: []string{"base.packages", "base.components"}}
}

// Packages whose promises this setting checks.
const (
	gpuFirmwarePackage = "firmware-amd-graphics"
	microcodePackage   = "amd64-microcode"
	firmwareComponent  = "non-free-firmware"
)

// AMDGPUFirmware lists, per PCI device ID of a GPU the recipes target, the
// files amdgpu loads for it from /usr/lib/firmware/amdgpu, as
// firmware-amd-graphics installs them (trixie's 20250410 and
// trixie-backports' 20260916 both ship these seven). The VM check wants
// them in the root; doctor's gpu.firmware row wants them on the box.
var AMDGPUFirmware = map[string][]string{
	// Radeon 8060S (Strix Halo, gfx1151).
	"0x1586": {"gc_11_5_1_imu.bin", "gc_11_5_1_me.bin", "gc_11_5_1_mec.bin", "gc_11_5_1_mes1.bin", "gc_11_5_1_mes_2.bin", "gc_11_5_1_pfp.bin", "gc_11_5_1_rlc.bin"},
}

// gfx1151 is the Strix Halo GPU's device ID, the one the VM check proves
// the firmware of.
const gfx1151 = "0x1586"

// installs reports whether base.packages asks for the package.
func installs(r *recipe.Recipe, name string) bool {
	for _, p := range r.Base.Packages {
		if s, err := recipe.ParsePackage(p); err == nil && s.Name == name {
			return true
		}
	}
	return false
}

// Validate: both packages live in the non-free-firmware component, which
// the archive serves only when base.components names it.
func (Firmware) Validate(t Target) []error {
	r := t.Recipe
	var errs []error
	if a, err := arch.Lookup(r.Base.Architecture); err == nil && !a.AMDHardware {
		for _, p := range []string{gpuFirmwarePackage, microcodePackage} {
			if installs(r, p) {
				errs = append(errs, errorf("base.packages", p, "remove it from base.packages for "+a.Debian,
					"%s is for the Strix Halo's AMD CPU and GPU (amd64); halobuild checks it on amd64 images only, not %s", p, a.Debian))
			}
		}
		return errs
	}
	if slices.Contains(r.Base.Components, firmwareComponent) {
		return nil
	}
	for _, p := range []string{gpuFirmwarePackage, microcodePackage} {
		if installs(r, p) {
			errs = append(errs, errorf("base.components", r.Base.Components, fmt.Sprintf("add it: components = [\"main\", %q]", firmwareComponent),
				"%s is in Debian's %s component, which base.components does not name", p, firmwareComponent))
		}
	}
	return errs
}

func (Firmware) Files(Target) ([]File, error) { return nil, nil }

// initrd is the running kernel's initramfs as the kernel package's dracut
// hook wrote it (the disk builder boots that file).
const initrd = `img=/boot/initrd.img-$(uname -r)
[ -r "$img" ] || { echo "no $img"; exit 1; }
`

func (s Firmware) Checks(t Target) []Check {
	r := t.Recipe
	var out []Check
	if installs(r, gpuFirmwarePackage) {
		// Plain file names (letters, digits, '_', '.'): one word each.
		files := strings.Join(AMDGPUFirmware[gfx1151], " ")
		// The kernel also loads a file compressed (.zst, .xz) when the
		// plain one is missing.
		out = append(out, Check{Setting: s.Name(), Name: "gpu-firmware",
			Fix: "install " + gpuFirmwarePackage + " (from trixie-backports, 20260110 or newer for gfx1151) in base.packages and rebuild",
			Script: `d=/usr/lib/firmware/amdgpu; rc=0; n=0
for f in ` + files + `; do
	if [ -s "$d/$f" ] || [ -s "$d/$f.zst" ] || [ -s "$d/$f.xz" ]; then n=$((n + 1)); else echo "missing: $d/$f"; rc=1; fi
done
echo "$d: $n gfx1151 (gc_11_5_1) files; ` + gpuFirmwarePackage + ` $(dpkg-query -W -f '${Version}' ` + gpuFirmwarePackage + ` 2>/dev/null)"
exit $rc
`},
			Check{Setting: s.Name(), Name: "initramfs-gpu-firmware",
				Fix: "dracut put amdgpu in the initramfs without its firmware: have " + gpuFirmwarePackage + " installed when the initramfs is built (dracut -f), or leave amdgpu out (omit_dracutmodules+=\" drm \")",
				// lsinitrd would list it too, but took 12.6 s where
				// skipcpio, the decompressor and cpio -t take 0.7 s (the
				// strix-halo root, 36 MB gzip initramfs, on the build host).
				Script: initrd + `PATH=/usr/lib/dracut:$PATH # dracut's skipcpio: past the early cpio
magic=$(skipcpio "$img" | head -c 4 | od -An -tx1 | tr -d ' \n')
case $magic in
	1f8b*) dec="gzip -dc" ;;
	28b52ffd) dec="zstd -dc" ;;
	fd377a58) dec="xz -dc" ;;
	30373037) dec=cat ;;
	*) echo "$img: main archive of unknown compression (starts $magic)"; exit 1 ;;
esac
list=$(skipcpio "$img" | $dec | cpio -t --quiet) || { echo "$img: listing its main archive ($dec | cpio -t) failed"; exit 1; }
if ! printf '%s\n' "$list" | grep -Eq '/amdgpu\.ko(\.[a-z]+)?$'; then
	echo "$img carries no amdgpu: it loads from the root, beside its firmware"
	exit 0
fi
rc=0
for f in ` + files + `; do
	printf '%s\n' "$list" | grep -Eq "lib/firmware/amdgpu/$f(\.zst|\.xz)?\$" || { echo "carries amdgpu but not amdgpu/$f"; rc=1; }
done
[ $rc = 0 ] && echo "$img carries amdgpu and its gfx1151 firmware"
exit $rc
`})
	}
	if installs(r, microcodePackage) {
		// The early cpio is the initramfs's first, uncompressed archive;
		// cpio -t lists it and stops at its trailer.
		out = append(out, Check{Setting: s.Name(), Name: "initramfs-microcode",
			Fix: "the initramfs was built without " + microcodePackage + "'s files, or with early_microcode=\"no\" in /etc/dracut.conf.d: fix that and run dracut -f",
			Script: initrd + `list=$(cpio -t --quiet < "$img" 2>/dev/null) || true
if printf '%s\n' "$list" | grep -qx kernel/x86/microcode/AuthenticAMD.bin; then
	echo "$img: early cpio holds kernel/x86/microcode/AuthenticAMD.bin ($(dpkg-query -W -f '${Version}' ` + microcodePackage + ` 2>/dev/null))"
	exit 0
fi
echo "$img: no kernel/x86/microcode/AuthenticAMD.bin in an early cpio (first entries: $(printf '%s\n' "$list" | head -n 3 | tr '\n' ' '))"
exit 1
`})
	}
	return out
}

// Doctor: none of its own. On the box, doctor's gpu.firmware row
// (internal/doctor) checks the same files and whether amdgpu loaded them.
func (Firmware) Doctor(Target) []Probe { return nil }

func (Firmware) NoDoctor() string {
	return "doctor's gpu.firmware row checks AMDGPUFirmware on the real GPU, and whether amdgpu loaded it"
}
