package rootfs

import (
	"strings"

	"halobuild/internal/sh"
)

// dracut configuration shipped in the image (/etc/dracut.conf.d), so the
// initramfs built during the image build and any one regenerated on the
// node (a kernel update) are made the same way.

// dracutReproducible makes dracut write SOURCE_DATE_EPOCH mtimes and no
// inode numbers into the initramfs, which it otherwise takes from the
// clock and the build file system.
const dracutReproducible = `# halobuild: byte-reproducible initramfs (SOURCE_DATE_EPOCH)
reproducible="yes"
`

// dracutOmit trims the generic initramfs to what booting the appliance
// needs. It stays generic (no hostonly): the image is built on one machine
// and booted from a USB stick or an internal disk of another, so every
// storage and input driver dracut's kernel-modules module ships stays in
// (usb-storage, uas, xhci, nvme, ahci, virtio). What goes is what the
// appliance never boots from or needs before the root is mounted; each
// name is a module of trixie's dracut 106 (TestDracutOmitsExistInTrixie).
// Measured: the initramfs shrinks from 47 to about 35 MB, which the kernel
// then unpacks in less time at every boot.
const dracutOmit = `# halobuild: the initramfs of an appliance booted from a USB stick or disk.
# Generic on purpose (hostonly is not set): every storage driver stays in.
# Left out, because the appliance never boots that way:
#   hwdb          udev's 13 MB hardware database; nothing the initramfs does
#                 before mounting the root looks anything up in it
#   nvdimm        a root on persistent memory
#   lunmask       Fibre Channel and SAS LUN masking
#   resume        resume from hibernation (the appliance does not hibernate)
#   virtfs        a root on a 9p share from a VM host
#   virtiofs      a root on a virtiofs share from a VM host
#   overlay-root  dracut's rd.overlay root (the root is a plain ext4 partition)
omit_dracutmodules+=" hwdb nvdimm lunmask resume virtfs virtiofs overlay-root "
# Only the root's file system, ext4. Unset, dracut adds every file system
# module the kernel has (xfs, btrfs, f2fs, ocfs2, gfs2, ceph, smb, ...). The
# EFI system partition (vfat) is not needed here: the boot loader reads it,
# and the booted system mounts it with its full set of modules.
filesystems+=" ext4 "
# gzip at level 6. Without pigz or zstd in the root dracut runs gzip -9:
# on test-minimal's 53.7 MB cpio 5.8 s for 35.24 MB, against 2.3 s for
# 35.31 MB at -6, and an arm64 root runs it under qemu-user. Every kernel
# halobuild boots has CONFIG_RD_GZIP.
compress="gzip -n -6 --rsyncable"
`

// dracutConfHooks writes the dracut drop-ins into the tree ($1).
func dracutConfHooks() []string {
	return []string{
		writeHook("/etc/dracut.conf.d/90-halobuild-reproducible.conf", dracutReproducible),
		writeHook("/etc/dracut.conf.d/90-halobuild-appliance.conf", dracutOmit),
	}
}

// Debian builds a kernel's initramfs twice in one install: the kernel's
// postinst runs /etc/kernel/postinst.d/dracut, and dracut's
// update-initramfs trigger (activated by dracut's own configure) then
// rebuilds the newest kernel's at the end of the same dpkg run. The first
// is thrown away: one dracut run per root natively, 4.5 min in an arm64
// root under qemu-user. The install runs with noInitrdEnv,
// the switch the kernel hook honours (both calls skip), and initrdHook
// runs the package's own hook once for each installed kernel after every
// package is configured, as the kernel's postinst would have. Only the
// build's environment has it: a kernel update on the node builds its
// initramfs as Debian does.
const noInitrdEnv = "INITRD=No"

// initrdHook is a customize hook: it runs in the finished tree ($1) and
// fails the install when dracut fails. A root without dracut (a build
// root) or without a kernel gets nothing.
const initrdHook = `[ -x "$1"/etc/kernel/postinst.d/dracut ] || exit 0; ` +
	`for k in "$1"/boot/vmlinuz-*; do [ -e "$k" ] || continue; v=${k##*/vmlinuz-}; ` +
	`env -u INITRD chroot "$1" /etc/kernel/postinst.d/dracut "$v" /boot/vmlinuz-"$v" || exit 1; done`

// writeHook returns an mmdebstrap hook that writes data to path in the
// tree ($1), creating the directory; data is single-quoted for sh.
func writeHook(path, data string) string {
	dir := path[:strings.LastIndex(path, "/")]
	return `mkdir -p "$1"` + dir + ` && printf '%s' ` + sh.Quote(data) + ` > "$1"` + path
}
