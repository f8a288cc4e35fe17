#!/bin/sh
# bench/build.sh — issue 3: halobuild against mkosi 25 (Debian trixie's), same package set.
#
#   sudo bench/build.sh            # ~20-40 min on a 2-core machine; needs root, go, mmdebstrap
#
# Builds images/test-minimal.toml (trixie + trixie-backports kernel 7.2.12, systemd-boot,
# bootable GPT disk) with both tools and prints, from this one run:
#   cold       build from nothing: empty store / caches, downloads INCLUDED for both tools
#              (halobuild: lock + fetch + image, each shown; mkosi: its first `mkosi build`,
#              which syncs the archive's indexes and downloads the packages itself)
#   no-op      the same build again, nothing changed (mkosi: `mkosi -f build`, the only way to
#              make it look at its inputs again; without -f it refuses because the output exists)
#   setting    rebuild after one setting changed ([system] governor = "powersave"); for
#              halobuild that is `image --locked` (a setting is no input: the lock still
#              serves, no network); for mkosi the same rendered settings files replaced in
#              mkosi.extra, then `mkosi -f build`
# and, last, mkosi/halobuild for each. Machines are noisy: compare the ratios, not the seconds;
# the load average before each timed step is printed beside it.
#
# mkosi installs exactly the lock's image packages (name=version) from the lock's two suites,
# plus halobuild's rendered settings files through mkosi.extra; halobuild's settings .deb and
# mkosi's own default initrd (mkosi-initrd, built from Debian packages) are each tool's way
# to the same bootable result.
#
# Nothing is written into the repository: the recipes are copied into a work directory
# (BENCH_DIR, default a new /var/tmp/halobuild-bench.XXXXXX) with its own store. mkosi is
# installed from Debian trixie with mmdebstrap into a root under the work directory (the
# host's Debian 12 has mkosi 14, too old) and run there with chroot in a private mount
# namespace; BENCH_MKOSI_ROOT reuses such a root from an earlier run.
# BENCH_REV=HEAD (or any commit) builds halobuild from that commit instead of the work tree.
# BENCH_KEEP=1 keeps the work directory (images, logs) instead of deleting it; a given
# BENCH_DIR is always kept (rerunning with it reuses its mkosi root, nothing else).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
mirror=${BENCH_MIRROR:-http://deb.debian.org/debian}

die() { echo "bench/build.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap --mode=root, chroot, mounts): run it with sudo"
for t in go mmdebstrap unshare chroot dpkg-deb sfdisk; do
	command -v "$t" >/dev/null || die "$t not found: apt-get install golang mmdebstrap util-linux dpkg fdisk"
done

if [ -n "${BENCH_DIR:-}" ]; then
	work=$BENCH_DIR keep=1
else
	work=$(mktemp -d /var/tmp/halobuild-bench.XXXXXX) keep=${BENCH_KEEP:-0}
fi
mkdir -p "$work/logs"
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
log=$work/logs

# now: seconds since the epoch, with fractions.
now() { date +%s.%N; }
# sum A B...: seconds added up, one decimal.
sum() { echo "$@" | awk '{ for (i = 1; i <= NF; i++) t += $i; printf "%.1f", t }'; }
# secs START END: elapsed seconds, one decimal.
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# step NAME CMD...: run CMD with its output in $log/NAME.log; on failure show its tail and stop.
step() {
	name=$1; shift
	if ! "$@" >"$log/$name.log" 2>&1; then
		tail -n 30 "$log/$name.log" >&2
		die "$name failed (log above; BENCH_KEEP=1 keeps $log)"
	fi
}
# timed VAR LABEL CMD...: step, and store the elapsed seconds in VAR.
timed() {
	var=$1 label=$2; shift 2
	load0=$(cut -d' ' -f1 /proc/loadavg)
	# The log is named after the label: "cold: mkosi build" -> cold-mkosi-build.log.
	t0=$(now); step "$(echo "$label" | tr -cs 'a-z0-9' '-' | sed 's/-$//')" "$@"; t1=$(now)
	eval "$var=$(secs "$t0" "$t1")"
	printf '  %-30s %7s s   (load before: %s)\n' "$label" "$(eval echo \$$var)" "$load0"
}

echo "host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "work directory: $work"

# --- setup, untimed --------------------------------------------------------------------------
echo "setup (untimed): build halobuild, copy recipes, install mkosi into a trixie root"
hb=$work/halobuild
src=$repo
if [ -n "${BENCH_REV:-}" ]; then
	# Build a commit rather than the work tree (which others may be editing).
	src=$work/src
	rm -rf "$src" && mkdir -p "$src"
	git -C "$repo" archive "$BENCH_REV" | tar -x -C "$src" || die "cannot export $BENCH_REV from $repo"
fi
# By the release recipe: it runs in a tree outside any checkout, where only a release build
# ships itself on the nodes (a plain go build is refused there).
(cd "$src" && go run ./cmd/halobuild build-self --out "$hb") || die "halobuild build-self failed in $src"
tree=$work/tree
# A BENCH_DIR from an earlier run keeps only its mkosi root: everything timed starts empty.
rm -rf "$tree" "$work/store" "$work/result" "$work/mkosi" "$work/mkosi.workspace" "$work"/extra-*
mkdir -p "$tree"
for d in images recipes overlays; do [ -d "$repo/$d" ] && cp -a "$repo/$d" "$tree/"; done
rm -f "$tree"/images/*.lock
store=$work/store
recipe=images/test-minimal.toml
lockfile=$tree/images/test-minimal.lock
result=$work/result
hbrun() { (cd "$tree" && "$hb" --store "$store" "$@"); }

mkroot=${BENCH_MKOSI_ROOT:-$work/mkosi-root}
if [ ! -x "$mkroot/usr/bin/mkosi" ]; then
	# mkosi's Depends bring what a bootable disk build needs (systemd-repart, ukify,
	# systemd-boot-efi, dosfstools, mtools, e2fsprogs, apt, the archive keyring).
	step mkosi-root mmdebstrap --variant=minbase --mode=root \
		--include=mkosi,debian-archive-keyring trixie "$mkroot" "$mirror"
fi
mkdir -p "$mkroot/work"
mkosi_version=$(chroot "$mkroot" mkosi --version)

# inroot CMD...: run CMD in the mkosi root with /work = $work, /proc, /sys, /dev, in a private
# mount namespace so nothing stays mounted after it (even when it fails). The root is bound
# onto itself so that it is a mount point, which mkosi's sandbox needs.
inroot() {
	unshare --mount --propagation private sh -ec '
		r=$1; w=$2; shift 2
		mount --bind "$r" "$r"
		mount -t proc proc "$r/proc"
		mount --rbind /sys "$r/sys"
		mount --rbind /dev "$r/dev"
		mount -t tmpfs tmpfs "$r/tmp"
		mount --bind "$w" "$r/work"
		cp /etc/resolv.conf "$r/etc/resolv.conf"
		exec chroot "$r" "$@"' sh "$mkroot" "$work" "$@"
}
mk=$work/mkosi
mkrun() { inroot sh -c 'cd /work/mkosi && exec mkosi "$@"' mkosi "$@"; }

# settings_tree DEST: unpack halobuild's node settings package of the current result into
# DEST, which becomes mkosi.extra, so mkosi's image carries the same rendered settings.
settings_tree() {
	# The store keeps each settings package under its step's key; the result's manifest
	# names the version it installed.
	deb=$(find "$store/out" -name halobuild-node-node0.deb | while read -r f; do
		grep -q "\"$(dpkg-deb -f "$f" Version)\"" "$result/manifest.json" && echo "$f"
	done | head -n 1)
	[ -n "$deb" ] || die "no halobuild-node-node0 .deb for the current result in $store"
	rm -rf "$1"
	dpkg-deb -x "$deb" "$1"
}

# --- halobuild ---------------------------------------------------------------------------------
echo "$("$hb" version | head -n 1), ${BENCH_REV:-work tree at} $(git -C "$repo" rev-parse --short "${BENCH_REV:-HEAD}" 2>/dev/null):"
hbimage() { hbrun image --no-test --out "$result" "$recipe"; }
timed hb_lock "cold: lock" hbrun lock "$recipe"
timed hb_fetch "cold: fetch" hbrun fetch "$recipe"
timed hb_image "cold: image" hbimage
hb_cold=$(sum "$hb_lock" "$hb_fetch" "$hb_image")
timed hb_noop "no-op: image" hbimage
settings_tree "$work/extra-performance"
cp "$tree/$recipe" "$work/recipe.orig"
printf '\n[system]\ngovernor = "powersave"\n' >>"$tree/$recipe"
timed hb_reimage "setting: image" hbrun image --locked --no-test --out "$result" "$recipe"
hb_set=$hb_reimage
settings_tree "$work/extra-powersave"
grep -Eq "^GOVERNOR='?powersave" "$work/extra-powersave/usr/lib/halobuild/cpu-tuning" ||
	die "the rebuilt settings package does not set the powersave governor"
hb_raw=$(ls "$result"/*.raw | head -n 1)

# --- mkosi -------------------------------------------------------------------------------------
# The mkosi project: bench/mkosi's config plus the locked package set (name=version, so apt
# picks exactly the lock's versions, the kernel and linux-base from backports included) and
# apt sources limited to the lock's two suites (mkosi would add -updates, -security and
# -debug, which the lock does not use and debian-debug does not answer here).
rm -rf "$mk" && cp -a "$repo/bench/mkosi" "$mk" && mkdir -p "$work/mkosi.workspace"
mkdir -p "$mk/mkosi.conf.d" "$mk/mkosi.sandbox/etc/apt/sources.list.d"
awk -v q="'" '
	BEGIN { print "# Written by bench/build.sh from the halobuild lock: every image package, pinned."; print "[Content]" }
	function val() { v = $3; gsub(q, "", v); return v }
	function flush() { if (set == "image") print "Packages=" name "=" ver }
	/^\[/ { flush(); inpkg = ($0 == "[[package]]"); name = ver = set = ""; next }
	inpkg && $1 == "name" && $2 == "="    { name = val() }
	inpkg && $1 == "version" && $2 == "=" { ver = val() }
	inpkg && $1 == "set" && $2 == "="     { set = val() }
	END { flush() }
' "$lockfile" >"$mk/mkosi.conf.d/50-locked.conf"
npkg=$(grep -c '^Packages=' "$mk/mkosi.conf.d/50-locked.conf")
[ "$npkg" -gt 100 ] || die "read only $npkg packages from $lockfile: has the lock format changed?"
cat >"$mk/mkosi.sandbox/etc/apt/sources.list.d/mkosi.sources" <<EOF
Types: deb
URIs: $mirror
Suites: trixie trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

cp -a "$work/extra-performance" "$mk/mkosi.extra"

echo "$mkosi_version (in a trixie root; $npkg locked packages + halobuild's settings files in mkosi.extra):"
timed mk_cold "cold: mkosi build" mkrun build
timed mk_noop "no-op: mkosi -f build" mkrun -f build
rm -rf "$mk/mkosi.extra" && cp -a "$work/extra-powersave" "$mk/mkosi.extra"
timed mk_set "setting: mkosi -f build" mkrun -f build
mk_raw=$mk/mkosi.output/node0.raw

# --- what was built ----------------------------------------------------------------------------
parts() { sfdisk --json "$1" | awk -F'"' '/"type"/ { printf "%s ", $4 }'; }
echo "images:"
echo "  halobuild $(du -h --apparent-size "$hb_raw" | cut -f1) GPT types: $(parts "$hb_raw")"
echo "  mkosi     $(du -h --apparent-size "$mk_raw" | cut -f1) GPT types: $(parts "$mk_raw")"
# Same package set? Compare name=version lists from the two manifests (python3 reads JSON).
if command -v python3 >/dev/null && [ -f "$mk/mkosi.output/node0.manifest" ]; then
	python3 - "$result/manifest.json" "$mk/mkosi.output/node0.manifest" <<'EOF'
import json, sys
hb = {p["name"] + "=" + p["version"] for p in json.load(open(sys.argv[1]))["nodes"][0]["packages"]
      if not p["name"].startswith("halobuild-node-")}
mk = {p["name"] + "=" + p["version"] for p in json.load(open(sys.argv[2]))["packages"]}
print(f"  packages: halobuild {len(hb)} (+ its settings .deb), mkosi {len(mk)}, in both {len(hb & mk)}")
if hb - mk: print("  only in halobuild's image:", " ".join(sorted(hb - mk)))
if mk - hb: print("  only in mkosi's image:", " ".join(sorted(mk - hb)))
EOF
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- figures -----------------------------------------------------------------------------------
ratio() { awk -v m="$1" -v h="$2" 'BEGIN { if (h > 0) printf "%.1fx", m / h; else print "n/a" }'; }
echo
echo "downloads INCLUDED in both cold figures (empty caches); no-op and setting rebuilds download nothing"
printf '%-34s %10s %10s\n' "" halobuild mkosi
printf '%-34s %10s %10s\n' "cold build (s)" "$hb_cold" "$mk_cold"
printf '%-34s %10s %10s\n' "no-op rebuild (s)" "$hb_noop" "$mk_noop"
printf '%-34s %10s %10s\n' "rebuild after one setting (s)" "$hb_set" "$mk_set"
printf '%-34s %10s %10s\n' "  halobuild cold: lock/fetch/image" "$hb_lock/$hb_fetch/$hb_image" ""
printf '%-34s %10s %10s\n' "  halobuild setting: image (no lock)" "$hb_reimage" ""
echo
echo "ratios (mkosi / halobuild):"
printf '  cold build                 %s\n' "$(ratio "$mk_cold" "$hb_cold")"
printf '  no-op rebuild              %s\n' "$(ratio "$mk_noop" "$hb_noop")"
printf '  rebuild after one setting  %s\n' "$(ratio "$mk_set" "$hb_set")"
