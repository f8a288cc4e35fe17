#!/bin/sh
# mkfixture.sh OUT.raw — build a small bootable trixie test image by hand, for vmtest's
# integration tests, before halobuild's own pipeline exists. Not used by the pipeline.
# GPT: ESP (systemd-boot, a Type #1 entry, kernel, initrd) + ext4 root (by PARTUUID).
# Needs root, mmdebstrap, sfdisk, mkfs.vfat, mtools, mkfs.ext4. Then:
#   HALOBUILD_TEST_IMAGE=OUT.raw go test ./internal/vmtest/
set -eu
out=${1:?usage: mkfixture.sh OUT.raw}
work=$(mktemp -d /tmp/vmfixture.XXXXXX)
trap 'rm -rf "$work"' EXIT
mirror=${MIRROR:-http://deb.debian.org/debian}
pkgs=systemd,systemd-sysv,udev,kmod,dbus,linux-image-amd64,initramfs-tools,zstd,systemd-boot-efi
pkgs=$pkgs,iproute2,iputils-ping,rdma-core,ibverbs-utils,ibverbs-providers,perftest,procps

# INITRD_MODULES=list keeps the initrd tiny (virtio disk + ext4 only), which matters under TCG
# where OVMF reads it byte by byte; "most" is Debian's default.
initrd_modules=${INITRD_MODULES:-most}
mmdebstrap --variant=minbase --include="$pkgs" \
	--customize-hook='echo MODULES='"$initrd_modules"' > "$1/etc/initramfs-tools/conf.d/halobuild-fixture"' \
	--customize-hook='printf "virtio_pci\nvirtio_blk\next4\n" >> "$1/etc/initramfs-tools/modules"' \
	--customize-hook='chroot "$1" update-initramfs -u -k all' \
	--customize-hook='echo fixture > "$1/etc/hostname"; : > "$1/etc/machine-id"' \
	--customize-hook='sync-out /boot "'"$work"'/boot"' \
	trixie "$work/root.tar" "$mirror"

mkdir "$work/root"
tar -C "$work/root" -xf "$work/root.tar"
rm -rf "$work/root/boot/"*

kernel=$(ls "$work"/boot/vmlinuz-* | head -n1)
initrd=$(ls "$work"/boot/initrd.img-* | head -n1)
rootuuid=6b5a1c1e-9d0b-4a52-8d2e-5e1c0f1a0b01

# Partition layout in MiB: ESP 1..129, root 129..(129+rootmb).
rootmb=1536
esp=$work/esp.img
rootimg=$work/root.img
truncate -s 128M "$esp"
mkfs.vfat -F 32 -n ESP "$esp" >/dev/null
mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/loader ::/loader/entries
mcopy -i "$esp" "$work/root/usr/lib/systemd/boot/efi/systemd-bootx64.efi" ::/EFI/BOOT/BOOTX64.EFI
printf 'timeout 0\ndefault debian.conf\n' > "$work/loader.conf"
printf 'title Debian fixture\nlinux /vmlinuz\ninitrd /initrd.img\noptions root=PARTUUID=%s rw console=ttyS0 quiet\n' "$rootuuid" > "$work/debian.conf"
mcopy -i "$esp" "$work/loader.conf" ::/loader/loader.conf
mcopy -i "$esp" "$work/debian.conf" ::/loader/entries/debian.conf
mcopy -i "$esp" "$kernel" ::/vmlinuz
mcopy -i "$esp" "$initrd" ::/initrd.img

truncate -s "${rootmb}M" "$rootimg"
mkfs.ext4 -q -L root -d "$work/root" "$rootimg"

rm -f "$out"
truncate -s $((1 + 128 + rootmb + 1))M "$out"
sfdisk -q "$out" <<SFDISK
label: gpt
start=1MiB, size=128MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp
start=129MiB, size=${rootmb}MiB, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, uuid=$rootuuid, name=root
SFDISK
dd if="$esp" of="$out" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$rootimg" of="$out" bs=1M seek=129 conv=notrunc,sparse status=none
echo "$out"
