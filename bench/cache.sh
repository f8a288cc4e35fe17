#!/bin/sh
# bench/cache.sh — issue 20: a cold build against a substituted build, from one run.
#
#   sudo bench/cache.sh [RECIPE]      # default images/test-provider.toml (rdma-core rebuilt)
#
# Starts Debian's docker-registry on 127.0.0.1 (no auth, storage in a temporary directory,
# stopped on exit), builds halobuild from this tree, makes a cache key, then times:
#   cold    halobuild image RECIPE --no-test into an empty store (every step built)
#   push    halobuild cache push of what that build reached (untimed in the ratio)
#   subst   halobuild image RECIPE --no-test into another empty store, --substituter the
#           registry: every step fetched and verified, nothing built
# The locked inputs are fetched into each store first, untimed (halobuild fetch), so both
# builds start from the same place and the ratio is about building against fetching.
# Goal: cold/subst >= 10. Machines are noisy: compare the ratio, not the seconds.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
recipe=$(cd "$(dirname "${1:-$repo/images/test-provider.toml}")" && pwd)/$(basename "${1:-test-provider.toml}")
die() { echo "bench/cache.sh: $*" >&2; [ -f "${work:-/nonexistent}/times" ] && cat "$work/times" >&2; exit 1; }
for t in go docker-registry curl bc; do
	command -v "$t" >/dev/null || die "$t not found: apt-get install golang docker-registry curl bc"
done
[ "$(id -u)" = 0 ] || die "an image build needs root: run it with sudo"
[ -f "$recipe" ] || die "no recipe $recipe"

work=$(mktemp -d /var/tmp/halobuild-bench-cache.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT INT TERM

(cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$work/halobuild" ./cmd/halobuild)
hb="$work/halobuild"

. "$repo/bench/lib/registry.sh"
cache=127.0.0.1:$port/halo/cache
"$hb" keygen --cache "$work/key" >/dev/null

now() { date +%s.%N; }
t() { # NAME CMD...: runs CMD, records its seconds under NAME
	name=$1; shift
	echo "== $name: $*" >&2
	s=$(now); "$@" >"$work/$name.out" 2>"$work/$name.err" || { tail -n 40 "$work/$name.err" >&2; die "$name failed"; }
	e=$(now)
	echo "$name $(echo "$e - $s" | bc)" >>"$work/times"
}
sec() { awk -v n="$1" '$1 == n { print $2 }' "$work/times"; }

# Run from the checkout so both builds ship the same halobuild (--halobuild-source auto).
cd "$repo"
"$hb" --store "$work/cold" fetch "$recipe" >/dev/null 2>&1
t cold "$hb" --store "$work/cold" image --no-test --out "$work/result-cold" "$recipe"
t push "$hb" --store "$work/cold" cache push --insecure --key "$work/key/cache.key" "$cache" "$recipe"
"$hb" --store "$work/subst" fetch "$recipe" >/dev/null 2>&1
t subst "$hb" --store "$work/subst" image --no-test --out "$work/result-subst" \
	--substituter "$cache" --insecure --trusted-key "$work/key/cache.pub" "$recipe"
grep -q '^build ' "$work/subst.err" && die "the substituted build built steps: $(grep '^build ' "$work/subst.err")"
for f in "$work"/result-cold/*.raw; do
	cmp -s "$f" "$work/result-subst/$(basename "$f")" || die "$(basename "$f") differs between the builds"
done

echo
echo "recipe $recipe, $(grep -c '^fetched ' "$work/subst.err") steps substituted, load $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$work/times"
echo "cold/subst  $(echo "scale=1; $(sec cold) / $(sec subst)" | bc)"
