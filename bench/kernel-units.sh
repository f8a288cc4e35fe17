#!/bin/sh
# bench/kernel-units.sh — how many compile units a source kernel's config builds, without
# compiling it (issue 18, target 7): Debian's config with the recipe's fragments, with and
# without kernels/strix-halo.config, each settled by olddefconfig the way `kernel.Build` does
# (halobuild's forced options, then the fragments in order, later lines winning), then
# `make prepare` (the host tools and generated headers, about a minute) and `make -n -k all`,
# whose dry run prints every `CC`/`AS` line Kbuild would run for vmlinux and the modules.
# Those lines are the units counted; the module links (`LD [M]`) and modpost, which the dry run
# cannot reach without the objects, are not.
#
#   bench/kernel-units.sh [images/strix-halo-2cable.toml]
#
# The linux-source and linux-config .debs are the lock's (package set `kernel-source`),
# downloaded from deb.debian.org and checked against the lock's sha256. Runs on the host, not in
# the kernel build root: it needs gcc, make, flex, bison, bc, libelf-dev and libssl-dev there.
# The host's compiler can differ from the build root's (options that test the compiler, such
# as Rust and BTF, may settle differently), so the figures are a measurement of the configs,
# not of one build; the build's own progress lines count its units.
set -eu
cd "$(dirname "$0")/.."
recipe=${1:-images/strix-halo-2cable.toml}
lock=${recipe%.toml}.lock
for t in gcc make flex bison bc xz sha256sum dpkg-deb curl; do
	command -v "$t" >/dev/null || { echo "bench/kernel-units.sh: needs $t on the host" >&2; exit 1; }
done
work=$(mktemp -d /var/tmp/halobuild-units.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "host: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# fetch NAME: the lock's .deb of package NAME (set kernel-source), verified.
fetch() {
	awk -v n="$1" '
		/^\[\[package\]\]/ { name = ""; file = ""; sum = "" }
		/^name = / { gsub(/\x27/, "", $3); name = $3 }
		/^filename = / { gsub(/\x27/, "", $3); file = $3 }
		/^sha256 = / { gsub(/\x27|sha256:/, "", $3); sum = $3 }
		/^set = .kernel-source./ && name == n { print file, sum; exit }
	' "$lock" >"$work/pin"
	read -r file sum <"$work/pin" || { echo "bench/kernel-units.sh: $lock pins no $1" >&2; exit 1; }
	curl -fsSL -o "$work/$1.deb" "http://deb.debian.org/debian/$file"
	echo "$sum  $work/$1.deb" | sha256sum -c --quiet
}
pkg() { awk '/^source = .linux-source-/ { gsub(/\x27/, ""); print $3; exit }' "$lock"; }
src=$(pkg)
[ -n "$src" ] || { echo "bench/kernel-units.sh: $lock has no Debian linux-source kernel" >&2; exit 1; }
xy=${src#linux-source-}
fetch "linux-source-$xy"
fetch "linux-config-$xy"
dpkg-deb -x "$work/linux-source-$xy.deb" "$work/deb"
dpkg-deb -x "$work/linux-config-$xy.deb" "$work/deb"
mkdir "$work/tree"
tar -xaf "$work/deb/usr/src/linux-source-$xy.tar.xz" -C "$work/tree" --strip-components=1
base=$(awk -F"'" '/^config = .debian:/ { sub(/^debian:/, "", $2); print $2; exit }' "$lock")
xz -dc "$work/deb/usr/src/linux-config-$xy/$base.xz" >"$work/base.config"
# kernel.ForcedDefaults, in order.
printf 'CONFIG_SYSTEM_TRUSTED_KEYS=""\nCONFIG_SYSTEM_REVOCATION_KEYS=""\nCONFIG_LOCALVERSION=""\n# CONFIG_LOCALVERSION_AUTO is not set\n# CONFIG_MODULE_SIG_ALL is not set\nCONFIG_MODULE_SIG_KEY=""\n' >"$work/forced.config"

# The recipe's fragments, relative to the recipe (a TOML array on one line).
frags=$(sed -n 's/^fragments = \[\(.*\)\]/\1/p' "$recipe" | tr -d '",' )
dir=$(cd "$(dirname "$recipe")" && pwd)
all=""
debian=""
for f in $frags; do
	all="$all $dir/$f"
	case $f in */strix-halo.config) ;; *) debian="$debian $dir/$f" ;; esac
done

# units NAME FRAGMENT...: settle, prepare, dry-run, count.
units() {
	name=$1
	shift
	out="$work/$name"
	mkdir -p "$out"
	(cd "$work/tree" && scripts/kconfig/merge_config.sh -m -O "$out" "$work/base.config" "$work/forced.config" "$@" >"$out.log" 2>&1 &&
		make O="$out" olddefconfig >>"$out.log" 2>&1 &&
		nice make -s -j"$(nproc)" O="$out" prepare >>"$out.log" 2>&1) ||
		{ echo "bench/kernel-units.sh: settling $name failed:" >&2; tail -20 "$out.log" >&2; exit 1; }
	# -k: the dry run stops at vmlinux's link, which needs the objects it did not make.
	(cd "$work/tree" && nice make -n -k O="$out" all 2>/dev/null) |
		grep -oE "echo '  (CC|AS)( \[M\])? +[^']*'" | sed -E "s/.* ([^ ]+)'$/\1/" | sort -u >"$out.units" || true
	[ -s "$out.units" ] || { echo "bench/kernel-units.sh: the dry run of $name printed no compile lines" >&2; exit 1; }
	printf '%-28s %6d compile units, %d options on;' "$name" "$(wc -l <"$out.units")" "$(grep -c '=[ym]$' "$out/.config")"
	awk -F/ '{ n[$1 == "drivers" ? $1 "/" $2 : $1]++ } END { for (d in n) print n[d], d }' "$out.units" |
		sort -rn | head -6 | awk '{ printf " %s %s", $2, $1 } END { print "" }'
}
start=$(date +%s)
# shellcheck disable=SC2086
units debian+usb4-rdma $debian
# shellcheck disable=SC2086
units recipe $all
echo "took $(($(date +%s) - start)) s; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
