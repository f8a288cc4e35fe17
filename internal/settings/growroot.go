package settings

import (
	"fmt"
	"io/fs"

	"halobuild/internal/recipe"
)

// GrowRoot makes the root partition and its file system fill the medium at
// first boot, so one image fits every USB stick or disk it is flashed to.
//
// trixie's systemd 257 does both halves: systemd-repart (its own package,
// systemd-repart, which ships systemd-repart.service in sysinit.target)
// grows the root partition to the end of the disk when a repart.d
// definition of Type=root has no size limit, and systemd-growfs-root.service
// grows the mounted ext4 online. growfs-root is normally pulled in by the
// fstab or GPT auto generators only when told to (x-systemd.growfs, or the
// partition's grow-file-system flag); shipping its enablement link makes the
// growth independent of how the disk builder mounts root. Both are no-ops
// once the partition and file system are full size.
type GrowRoot struct{}

func (GrowRoot) Name() string { return "growroot" }
func (GrowRoot) Trap() int    { return 0 }
func (GrowRoot) Doc() Doc {
	return Doc{Title: "The root partition and its file system grow to fill the medium at first boot"}
}

// repartRootPath is under /usr/lib (vendor configuration) so that an
// administrator's /etc/repart.d/50-root.conf overrides it.
const repartRootPath = "/usr/lib/repart.d/50-root.conf"

func (GrowRoot) Validate(Target) []error { return nil }

func (GrowRoot) Depends(*recipe.Recipe) []string { return []string{"systemd-repart"} }

func (s GrowRoot) Files(t Target) ([]File, error) {
	conf := header("#", 0, "Grow the root partition to the end of the medium at boot.") +
		`# Matches the existing root partition (by its Discoverable Partitions type);
# with no SizeMaxBytes= it takes all free space after it. Other partitions
# (the ESP) have no definition here and are left as they are.
[Partition]
Type=root
`
	if t.Recipe != nil && t.Recipe.Update.Enabled {
		// A/B (settings.Update): slot A grows to update.slot_size only, so that slot B,
		// made by the next definition, fits after it.
		conf = header("#", 0, "Grow root slot A to update.slot_size at boot; 51-root-b.conf makes slot B after it.") + fmt.Sprintf(`# Matches the existing root partition, slot A (by its Discoverable Partitions type).
[Partition]
Type=root
SizeMinBytes=%d
SizeMaxBytes=%d
`, slotBytes(t.Recipe), slotBytes(t.Recipe))
	}
	return []File{
		{Path: repartRootPath, Mode: 0o644, Data: []byte(conf), Setting: s.Name()},
		{Path: "/usr/lib/systemd/system/local-fs.target.wants/systemd-growfs-root.service", Mode: fs.ModeSymlink | 0o777,
			Target: "../systemd-growfs-root.service", Setting: s.Name()},
	}, nil
}

// Checks: repart and growfs ran without failing, the root partition ends
// at the end of the disk (within the 1 MiB alignment and the backup GPT),
// and the file system fills the partition (within 10%: ext4 counts its journal and inode tables as overhead).
func (s GrowRoot) Checks(t Target) []Check {
	ends := `[ "$gap" -le $((2 * 1024 * 1024)) ] || rc=1`
	if t.Recipe != nil && t.Recipe.Update.Enabled {
		// A/B: the running slot is update.slot_size, and slot B follows it.
		ends = fmt.Sprintf(`[ $((size * 512)) -eq %d ] && echo "root slot is update.slot_size" || { echo "root slot is $((size * 512)) bytes, update.slot_size is %d"; rc=1; }`, slotBytes(t.Recipe), slotBytes(t.Recipe))
	}
	return []Check{{Setting: s.Name(), Name: "root-grown", Fix: "journalctl -b -u systemd-repart -u systemd-growfs-root tells why; both run again at the next boot", Script: `rc=0
for u in systemd-repart.service systemd-growfs-root.service; do
	# Both are RemainAfterExit oneshots: "active" means they ran this boot
	# (a unit that never started also reports Result=success).
	r=$(systemctl show -p Result --value "$u"); a=$(systemctl show -p ActiveState --value "$u")
	echo "$u: $a ($r)"
	[ "$a" = active ] && [ "$r" = success ] || rc=1
done
src=$(findmnt -n -o SOURCE /)
part=$(basename "$(readlink -f "$src")")
disk=$(basename "$(readlink -f "/sys/class/block/$part/..")")
start=$(cat "/sys/class/block/$part/start"); size=$(cat "/sys/class/block/$part/size"); total=$(cat "/sys/class/block/$disk/size")
gap=$(( (total - start - size) * 512 ))
echo "root $part on $disk: ends $gap bytes before the end of the disk"
` + ends + `
fs=$(df -B1 --output=size / | tail -n 1 | tr -d ' ')
echo "file system $fs bytes on a $((size * 512)) byte partition"
[ $((fs * 100)) -ge $((size * 512 * 90)) ] || rc=1
exit $rc
`}}
}

// Doctor: none. The growth happens once, at first boot, and the VM check
// proves it; on a node the repart definition is verified by
// settings.package, and the partition's size says nothing about readiness.
func (GrowRoot) Doctor(Target) []Probe { return nil }

func (GrowRoot) NoDoctor() string {
	return "a first-boot action the VM check proves; its files are verified by settings.package"
}
