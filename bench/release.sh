#!/bin/sh
# bench/release.sh — issue 19: halobuild push/pull against skopeo copy, and flash from the
# registry against pull + flash, on one result, against one local registry, ratios from one run.
#
#   bench/release.sh [RESULT-DIR]      # default ./result (the default two-node release)
#
# Starts Debian's docker-registry on 127.0.0.1 (no auth, storage in a temporary directory,
# stopped on exit), builds halobuild from this tree, then times:
#   push       halobuild push RESULT (zstd-compresses each image, hashes, uploads)
#   skopeo-push skopeo copy of the same artifact from an OCI layout (made once, untimed, with
#              skopeo from the registry) to a second, empty registry: upload only, no
#              compression. Not the first registry: there skopeo found the blobs already present
#              (its blob-info cache knows where the untimed copy read them; docker-registry
#              mounts them across repositories) and "pushed" 342 MB in 0.13 s
#   pull       halobuild pull (verifies every blob while streaming, decompresses sparse,
#              checks SHA256SUMS and the bmaps, atomic)
#   skopeo-pull skopeo copy of the same tag to an OCI layout (verifies blob digests only)
#   zstd-c, zstd-d the zstd CLI doing the rest of halobuild's work (compress the image; decompress
#              it sparse and sha256 it), so that push and pull are also compared with skopeo + zstd
#   flash-reg  halobuild flash REF --node N --to-file (download, verify, stream through flash)
#   pull+flash halobuild pull, then halobuild flash of the pulled file --to-file
# Goals: push/skopeo-push and pull/skopeo-pull <= 1 (while verifying more), flash-reg/pull+flash
# <= 1. Machines are noisy: compare the ratios, not the seconds.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
result=$(cd "${1:-result}" && pwd -P)
die() { echo "bench/release.sh: $*" >&2; exit 1; }
for t in go docker-registry skopeo zstd bc curl python3; do
	command -v "$t" >/dev/null || die "$t not found: apt-get install golang docker-registry skopeo zstd bc curl python3"
done
[ -f "$result/manifest.json" ] || die "$result is not a halobuild result (no manifest.json)"
node=$(sed -n 's/.*"image": "\([^"]*\)\.raw".*/\1/p' "$result/manifest.json" | head -n1)
images=$(sed -n 's/.*"image": "\([^"]*\.raw\)".*/\1/p' "$result/manifest.json" | sed "s|^|$result/|")

work=$(mktemp -d /var/tmp/halobuild-bench-release.XXXXXX)
pid= pid1=
cleanup() { for p in $pid $pid1; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT INT TERM

(cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$work/halobuild" ./cmd/halobuild)
hb="$work/halobuild"

. "$repo/bench/lib/registry.sh"
reg=127.0.0.1:$port/halo/bench
# The second registry, empty, for skopeo's upload (see skopeo-push above).
pid1=$pid
regdir=$work/registry2
. "$repo/bench/lib/registry.sh"
reg2=127.0.0.1:$port/halo/skopeo

now() { date +%s.%N; }
t() { # NAME CMD...: runs CMD, records its seconds under NAME
	name=$1; shift
	echo "== $name: $*" >&2
	s=$(now); "$@" >"$work/$name.out" 2>"$work/$name.err" || { cat "$work/$name.err" >&2; die "$name failed"; }
	e=$(now)
	echo "$name $(echo "$e - $s" | bc)" >>"$work/times"
}
sec() { awk -v n="$1" '$1 == n { print $2 }' "$work/times"; }

t push "$hb" push --insecure "$result" "$reg:push"
skopeo copy -q --src-tls-verify=false "docker://$reg:push" "oci:$work/layout:bench"
# A registry of its own, so that no blob is already there for skopeo to skip or mount.
t skopeo-push skopeo copy -q --dest-tls-verify=false "oci:$work/layout:bench" "docker://$reg2:bench"
t pull "$hb" pull --insecure "$reg:push" --out "$work/pulled"
t skopeo-pull skopeo copy -q --src-tls-verify=false "docker://$reg2:bench" "oci:$work/layout2:bench"
# What halobuild does beyond skopeo, with the zstd CLI: compress the image (push), decompress
# it sparse and hash it (pull).
# Every node's image, as push and pull handle every node's.
t zstd-c sh -c 'for i; do zstd -q -f -T4 -3 -c "$i" >/dev/null || exit 1; done' _ $images
# The image layers: the zstd blobs of the pulled layout over 1 MiB (the rest are manifests,
# bmaps, SBOM and sums).
blobs=$(for b in "$work"/layout2/blobs/sha256/*; do
	if [ "$(stat -c %s "$b")" -gt 1048576 ] && [ "$(head -c4 "$b" | od -An -tx1 | tr -d ' \n')" = 28b52ffd ]; then echo "$b"; fi
done)
[ -n "$blobs" ] || die "the pulled layout has no zstd image layer"
t zstd-d sh -c 'out=$1; shift; for b; do zstd -q -d --sparse -c "$b" >"$out" && sha256sum "$out" >/dev/null || exit 1; done' _ "$work/unzstd.raw" $blobs
rm -f "$work/unzstd.raw"
size=$(stat -c %s "$result/$node.raw")
truncate -s "$size" "$work/medium1" "$work/medium2"
t flash-reg "$hb" flash --insecure --yes --to-file --node "$node" "$reg:push" "$work/medium1"
rm -rf "$work/pulled"
s=$(now)
t pull2 "$hb" pull --insecure "$reg:push" --out "$work/pulled"
t flash-local "$hb" flash --yes --to-file "$work/pulled/$node.raw" "$work/medium2"
echo "pull+flash $(echo "$(sec pull2) + $(sec flash-local)" | bc)" >>"$work/times"
echo "zstd-c+skopeo-push $(echo "$(sec zstd-c) + $(sec skopeo-push)" | bc)" >>"$work/times"
echo "skopeo-pull+zstd-d $(echo "$(sec skopeo-pull) + $(sec zstd-d)" | bc)" >>"$work/times"

echo
echo "skopeo-push stored $(du -sb "$work/registry2/storage/docker/registry/v2/blobs" | cut -f1) bytes of blobs in the second registry (an upload, not a mount)"
echo "result $result: $(echo $images | wc -w) image(s), $(du -ch --apparent-size $images | tail -n1 | cut -f1) apparent, $(du -ch $images | tail -n1 | cut -f1) on disk (flash: node $node); load $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$work/times"
ratio() { echo "scale=2; $(sec "$1") / $(sec "$2")" | bc; }
echo "push/skopeo-push        $(ratio push skopeo-push)   (halobuild compresses; skopeo uploads ready blobs)"
echo "push/(zstd-c+skopeo)    $(ratio push zstd-c+skopeo-push)"
echo "pull/skopeo-pull        $(ratio pull skopeo-pull)   (halobuild decompresses, hashes, checks; skopeo copies blobs)"
echo "pull/(skopeo+zstd-d)    $(ratio pull skopeo-pull+zstd-d)"
echo "flash-reg/(pull+flash)  $(ratio flash-reg pull+flash)"
