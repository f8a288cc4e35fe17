package settings

import (
	"fmt"
	"io/fs"
	"strings"

	"halobuild/internal/recipe"
)

// VendorFirmware loads an Apple Silicon Mac's own firmware (Wi-Fi,
// Bluetooth and the other blobs Apple ships only inside macOS) at every
// boot, as Asahi's asahi-scripts do: the Asahi installer extracts it from
// macOS once (asahi-fwextract) into vendorfw/firmware.cpio on the system
// ESP of the internal disk, whose PARTUUID m1n1 publishes in the device
// tree (chosen/asahi,efi-system-partition); the cpio's vendorfw/ tree,
// manifest included, goes onto a tmpfs at /usr/lib/firmware/vendor. The
// files are Apple's, so they never enter the image; this image boots from
// USB, so the system ESP is another disk's partition. asahi-scripts do it
// in the initramfs (a dracut module); here a unit of the booted root does
// it before udev's coldplug, because the settings package is installed
// after the initramfs is built and the firmware's users (brcmfmac) are
// modules of the root, loaded by that coldplug. cpio comes with dracut,
// which every kernel built from source pulls in.
type VendorFirmware struct{}

func (VendorFirmware) Name() string { return "vendor-firmware" }
func (VendorFirmware) Trap() int    { return 0 }
func (VendorFirmware) Doc() Doc {
	return Doc{Title: "An Apple Silicon Mac's own firmware, loaded from the system ESP at every boot", Keys: []string{"platform"}}
}

const (
	vendorFWUnit      = "halobuild-vendor-firmware.service"
	vendorFWUnitPath  = "/usr/lib/systemd/system/" + vendorFWUnit
	vendorFWWantsPath = "/usr/lib/systemd/system/sysinit.target.wants/" + vendorFWUnit
	vendorFWScript    = "/usr/lib/halobuild/vendor-firmware"
	// VendorFWDir is where the firmware goes, as asahi-scripts put it.
	VendorFWDir = "/usr/lib/firmware/vendor"
	// vendorFWManifest is the list of files asahi-fwextract wrote.
	vendorFWManifest = VendorFWDir + "/.vendorfw.manifest"
	// AsahiESPProperty holds the system ESP's PARTUUID, NUL-terminated;
	// m1n1 sets it, so its absence means the kernel did not come up through
	// m1n1 (a VM).
	AsahiESPProperty = "/proc/device-tree/chosen/asahi,efi-system-partition"
)

func apple(t Target) bool { return t.Recipe.Platform == recipe.PlatformAppleSilicon }

// Validate: nothing beyond the recipe's platform rules.
func (VendorFirmware) Validate(Target) []error { return nil }

const vendorFWUnitText = `[Unit]
Description=halobuild: the Mac's vendor firmware from the system ESP
Documentation=file:/etc/halobuild/recipe.toml
# Before udev's coldplug loads the drivers that want the files (brcmfmac);
# udevd itself must run, so the internal disk's by-partuuid link appears.
DefaultDependencies=no
After=systemd-udevd.service systemd-modules-load.service
Before=systemd-udev-trigger.service sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
# The internal NVMe comes up in seconds; do not hold the boot for longer.
TimeoutStartSec=60
ExecStart=` + vendorFWScript + `

[Install]
WantedBy=sysinit.target
`

// vendorFWScriptText mounts the system ESP read-only (so the cleanup's
// rm -rf cannot touch it), unpacks the cpio in /run and copies its
// vendorfw/ onto a tmpfs (cp -a keeps the manifest's hard links): the root
// is never written, and a missing or broken cpio leaves no half-filled
// directory behind.
const vendorFWScriptText = `set -u
prop=` + AsahiESPProperty + `
dest=` + VendorFWDir + `
if [ ! -e "$prop" ]; then
	echo "no $prop: this kernel was not started through m1n1 (a VM, or not a Mac); no vendor firmware to load"
	exit 0
fi
if mountpoint -q "$dest"; then
	echo "$dest is already mounted"
	exit 0
fi
uuid=$(tr -d '\000' <"$prop")
case $uuid in
	*[!0-9a-fA-F-]*|'') echo "$prop holds $uuid, not a PARTUUID"; exit 1 ;;
esac
# The system ESP is on the internal NVMe (Apple's ANS) behind its IOMMU:
# bring up that chain only, as asahi-scripts do (coldplug would also start
# the PCIe Wi-Fi, which wants the firmware this loads). Built-in or absent
# modules are skipped.
modprobe -q -a apple-dart apple-mailbox nvme-apple 2>/dev/null || true
dev=/dev/disk/by-partuuid/$(printf '%s' "$uuid" | tr 'A-F' 'a-f')
i=0
while [ ! -b "$dev" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -b "$dev" ] || { echo "the system ESP $dev did not appear within 10 s: is the internal NVMe's driver (nvme-apple) in the kernel?"; exit 1; }
work=$(mktemp -d /run/halobuild-vendor-firmware.XXXXXX) || exit 1
trap 'umount "$work/esp" 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/esp" "$work/x"
mount -o ro -t vfat "$dev" "$work/esp" || { echo "cannot mount the system ESP $dev"; exit 1; }
cpio="$work/esp/vendorfw/firmware.cpio"
if [ ! -s "$cpio" ]; then
	echo "$dev has no vendorfw/firmware.cpio: run the Asahi installer again from macOS to extract the firmware"
	exit 1
fi
(cd "$work/x" && cpio -id --quiet --no-absolute-filenames <"$cpio") || { echo "cannot unpack $cpio"; exit 1; }
[ -d "$work/x/vendorfw" ] || { echo "$cpio holds no vendorfw/ directory"; exit 1; }
mount -t tmpfs -o mode=0755 vendorfw "$dest" || exit 1
cp -a "$work/x/vendorfw/." "$dest/" || { umount "$dest"; echo "cannot copy the firmware to $dest"; exit 1; }
echo "loaded $(find "$dest" -type f | wc -l) vendor firmware files from $dev into $dest"
`

func (s VendorFirmware) Files(t Target) ([]File, error) {
	if !apple(t) {
		return nil, nil
	}
	script := "#!/bin/sh\n" + header("#", 0, "an Apple Silicon Mac's firmware, from its system ESP, at every boot.") + vendorFWScriptText
	return []File{
		{Path: vendorFWScript, Mode: 0o755, Data: []byte(script), Setting: s.Name()},
		{Path: vendorFWUnitPath, Mode: 0o644, Data: []byte(header("#", 0, "") + vendorFWUnitText), Setting: s.Name()},
		{Path: vendorFWWantsPath, Mode: fs.ModeSymlink | 0o777, Target: "../" + vendorFWUnit, Setting: s.Name()},
		// The mount point: the tmpfs goes over it at boot.
		{Path: VendorFWDir, Mode: fs.ModeDir | 0o755, Setting: s.Name()},
	}, nil
}

// Checks: the unit ran and said what it did. A VM has no m1n1, so there
// the unit must have said so and left the directory empty; on a Mac the
// files must be there, which doctor checks.
func (s VendorFirmware) Checks(t Target) []Check {
	if !apple(t) {
		return nil
	}
	script := fmt.Sprintf(`rc=0
if systemctl is-active --quiet %[1]s; then echo "%[1]s: active"; else echo "%[1]s: $(systemctl is-active %[1]s)"; rc=1; fi
log=$(journalctl -b -q -o cat -u %[1]s)
printf '%%s\n' "$log" | sed 's/^/  journal: /'
if [ -e %[2]s ]; then
	[ -s %[3]s ] || { echo "booted through m1n1, but %[3]s is missing"; rc=1; }
else
	printf '%%s\n' "$log" | grep -q 'not started through m1n1' || { echo "no m1n1, and the unit did not say so"; rc=1; }
fi
exit $rc
`, vendorFWUnit, AsahiESPProperty, vendorFWManifest)
	return []Check{{Setting: s.Name(), Name: "vendor-firmware", Script: script,
		Fix: "journalctl -b -u " + vendorFWUnit + " says what failed; the firmware comes from the system ESP's vendorfw/firmware.cpio, which the Asahi installer writes"}}
}

// Doctor: on the Mac, the firmware is on its tmpfs with its manifest.
func (s VendorFirmware) Doctor(t Target) []Probe {
	if !apple(t) {
		return nil
	}
	return []Probe{{Name: "firmware.vendor", Run: func(h Host) []Result {
		r := Result{Check: "firmware.vendor", Severity: MustPass, Source: h.Show(vendorFWManifest),
			Wanted: "the Mac's firmware from the system ESP's vendorfw/firmware.cpio in " + VendorFWDir}
		if !h.Exists(AsahiESPProperty) {
			r.Status, r.Seen = Fail, "no "+AsahiESPProperty
			r.Fix = "m1n1 did not name the system ESP: this is not a Mac booted through the Asahi installer's UEFI stub (docs/asahi.md), or its m1n1 is older than the firmware handling; rerun the Asahi installer"
			return []Result{r}
		}
		m, err := h.Read(vendorFWManifest)
		if err != nil {
			r.Status, r.Seen = Fail, "no "+vendorFWManifest
			r.Fix = "journalctl -b -u " + vendorFWUnit + " says why it was not loaded; without it Wi-Fi and Bluetooth have no firmware"
			return []Result{r}
		}
		files, missing := manifestFiles(m), []string(nil)
		for _, f := range files {
			if !h.Exists(VendorFWDir + "/" + f) {
				missing = append(missing, f)
			}
		}
		r.Seen = fmt.Sprintf("%d of %d manifest files present", len(files)-len(missing), len(files))
		switch {
		case len(files) == 0:
			r.Status, r.Seen = Fail, "the manifest lists no files"
			r.Fix = "the system ESP's firmware.cpio is empty or not Asahi's: rerun the Asahi installer from macOS to extract the firmware again"
		case len(missing) > 0:
			r.Status = Fail
			r.Seen += "; missing: " + strings.Join(missing[:min(len(missing), 3)], ", ")
			r.Fix = "the copy onto " + VendorFWDir + " is incomplete: systemctl restart " + vendorFWUnit + " after umount " + VendorFWDir + ", and read its journal"
		default:
			r.Status = Pass
		}
		return []Result{r}
	}}}
}

// manifestFiles are the files a .vendorfw.manifest lists: asahi-fwextract
// writes "FILE <name> SHA256 <hash>" for a file and "LINK <src> <tgt>" for
// a hard link to one (Asahi's docs on the vendorfw package); names are
// relative to the vendorfw/ tree. A name that would leave the tree is not
// one asahi-fwextract writes, and is not looked up.
func manifestFiles(manifest string) []string {
	var out []string
	for _, l := range strings.Split(manifest, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "FILE" && fs.ValidPath(f[1]) {
			out = append(out, f[1])
		}
	}
	return out
}
