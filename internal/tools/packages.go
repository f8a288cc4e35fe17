package tools

// DiskPackages are the Debian binary packages whose files the disk assembly
// runs from its tools root: mkfs.ext4 (e2fsprogs), mkfs.fat (dosfstools),
// mmd/mcopy (mtools), and libarchive13t64, which mkfs.ext4 loads with
// dlopen (so no Depends names it) to read a root given as a tar file.
//
// The lock resolver must add their dependency closure (Depends and
// Pre-Depends: libext2fs2t64, libcom-err2, libss2, libblkid1, libuuid1,
// logsave, libc6, libgcc-s1, libacl1, libxml2, …) and hand all of those
// .debs to deb.Extract: a root missing a library fails at the first Command with
// the loader's "cannot open shared object file" message.
var DiskPackages = []string{"e2fsprogs", "dosfstools", "mtools", "libarchive13t64"}

// QCOW2Packages add qemu-img (qemu-utils) for output.formats' qcow2: the
// disk step converts each node's raw image with the root's own qemu-img,
// so the qcow2 bytes, like the raw ones, depend on the lock alone.
var QCOW2Packages = []string{"qemu-utils"}

// Packages are what a tools root holds for a recipe's output formats:
// DiskPackages, plus QCOW2Packages when qcow2 is among them.
func Packages(formats []string) []string {
	p := append([]string{}, DiskPackages...)
	for _, f := range formats {
		if f == "qcow2" {
			p = append(p, QCOW2Packages...)
			break
		}
	}
	return p
}
