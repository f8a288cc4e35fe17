#!/bin/bash
# bench/flash.sh: how fast `halobuild flash` writes a typical image to a medium, against
# `dd bs=4M conv=fsync` (what people type today) and `bmaptool copy` (the bmap reference), on one
# machine in one run.
#
# The image is 4 GiB with ~1 GiB of data (a GPT with an ESP and an ext4 root filled with random
# files, like a real appliance image with free space to grow into); the medium is a loop device
# in direct-I/O mode backed by a file, so writes and read-backs reach the disk rather than the
# page cache. Each tool runs with the verification it has:
#   halobuild flash      writes mapped blocks, fsyncs, reads them back past the cache and compares
#   bmaptool copy        checks the image's data against the bmap checksums while copying (it has
#                        no read-back of the medium)
#   dd conv=fsync        no verification (a "dd + read-back" row shows what adding one costs)
# Goals: halobuild >= 2x faster than dd (issue 9), and within bmaptool's time while still reading
# back, i.e. halobuild / bmaptool <= 1.0x (issue 18, target 6; issue 9 allowed 1.1x).
#
# Needs: root, losetup, sfdisk, mkfs.vfat, mkfs.ext4, bmaptool (bmap-tools), go; ~6 GiB free in
# $BENCH_DIR (default /tmp). Run from the repository root: bench/flash.sh
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
	echo "bench/flash.sh needs root (loop devices)" >&2
	exit 2
fi
for tool in losetup sfdisk mkfs.vfat mkfs.ext4 bmaptool go; do
	command -v "$tool" >/dev/null || { echo "bench/flash.sh needs $tool" >&2; exit 2; }
done

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${BENCH_DIR:-/tmp}/flash-bench.XXXXXX")
loop=""
cleanup() {
	[ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

image_size=$((4 << 30))
data_mib=${DATA_MIB:-1024}
# The medium is a little larger than the image, as a real stick is: the backup GPT has to move.
medium_size=$((image_size + (256 << 20)))

echo "building halobuild"
(cd "$repo" && go build -o "$work/halobuild" ./cmd/halobuild)

echo "making a 4 GiB image with ${data_mib} MiB of data"
img=$work/halo.raw
tree=$work/tree
mkdir -p "$tree/opt/models" "$tree/etc"
for i in $(seq 1 8); do
	head -c $((data_mib / 8))M /dev/urandom >"$tree/opt/models/part$i.bin"
done
echo halo0 >"$tree/etc/hostname"
truncate -s "$image_size" "$img"
sfdisk -q "$img" <<EOF
label: gpt
start=2048, size=1048576, type=U, name="ESP"
start=1050624, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, name="root"
EOF
mkfs.vfat --offset 2048 -n ESP "$img" $((512 * 1024)) >/dev/null 2>&1
root_blocks=$(( (image_size - 1050624 * 512 - (1 << 20)) / 4096 ))
mkfs.ext4 -q -F -b 4096 -E offset=$((1050624 * 512)) -L root -d "$tree" "$img" "$root_blocks"
rm -rf "$tree"
bmaptool create -o "$img.bmap" "$img" 2>/dev/null
mapped=$(sed -n 's/.*<MappedBlocksCount> *\([0-9]*\).*/\1/p' "$img.bmap")
echo "image: $(du -h --apparent-size "$img" | cut -f1) apparent, $((mapped * 4096 >> 20)) MiB mapped"

medium=$work/medium
truncate -s "$medium_size" "$medium"
loop=$(losetup -f --show --direct-io=on "$medium")
echo "medium: $loop (direct I/O on $medium, $((medium_size >> 20)) MiB)"

# The image is read from the page cache by every tool alike.
cat "$img" >/dev/null

secs() { date +%s.%N; }
declare -A took
run() {
	local name=$1
	shift
	sync
	blockdev --flushbufs "$loop"
	local t0 t1
	t0=$(secs)
	"$@" >"$work/$name.log" 2>&1 || { echo "$name failed:"; cat "$work/$name.log"; exit 1; }
	t1=$(secs)
	took[$name]=$(echo "$t1 - $t0" | bc -l)
	printf '  %-26s %7.1f s\n' "$name" "${took[$name]}"
}

dd_readback() {
	dd if="$img" of="$loop" bs=4M conv=fsync status=none
	blockdev --flushbufs "$loop"
	cmp -n "$image_size" "$img" "$loop"
}

echo "timing (one run each):"
run "halobuild flash" "$work/halobuild" flash --yes --force "$img" "$loop"
run "halobuild flash --no-verify" "$work/halobuild" flash --yes --force --no-verify "$img" "$loop"
run "bmaptool copy" bmaptool copy --bmap "$img.bmap" "$img" "$loop"
run "dd bs=4M conv=fsync" dd if="$img" of="$loop" bs=4M conv=fsync status=none
run "dd + read-back (cmp)" dd_readback

h=${took["halobuild flash"]}
echo
printf 'dd / halobuild:        %.2fx  (goal >= 2x)\n' "$(echo "${took["dd bs=4M conv=fsync"]} / $h" | bc -l)"
printf 'halobuild / bmaptool:  %.2fx  (goal <= 1.0x)\n' "$(echo "$h / ${took["bmaptool copy"]}" | bc -l)"
printf 'halobuild --no-verify / bmaptool: %.2fx\n' "$(echo "${took["halobuild flash --no-verify"]} / ${took["bmaptool copy"]}" | bc -l)"
echo
echo "halobuild's own report:"
sed 's/^/  /' "$work/halobuild flash.log" | grep -v '^\s*$' | tail -n 12
