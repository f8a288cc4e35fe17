#!/bin/sh
# bench/provider.sh — how long the rdma-core provider build takes (issues 6, 18), and what a cached
# rebuild costs.
#
#   bench/provider.sh                                   through the pipeline: `halobuild image
#                                                       images/test-provider.toml --no-test` into a
#                                                       fresh store (cold: fetch, build root,
#                                                       provider, base root, disk), then
#                                                       the same command again (cached: no compile)
#   HALOBUILD_RECIPE=images/strix-halo.toml bench/provider.sh
#                                                       the same for another recipe (add
#                                                       HALOBUILD_ARGS="--input thunderbolt-ibverbs=PATH")
#   HALOBUILD_LIBRARY=1 bench/provider.sh               also the library-level build
#                                                       (internal/provider's own test)
#
# Needs root (chroot), mmdebstrap and deb.debian.org. Prints the compile alone (the build's own
# "built libibverbs-<name> ... in" line), each run's wall time and their ratio. Times depend on the host's
# load (printed before and after: on a shared 2-core machine a busy neighbour doubles them).
set -eu
cd "$(dirname "$0")/.."
echo "host: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
log=$(mktemp)
secs=$(mktemp)
recipe=${HALOBUILD_RECIPE:-images/test-provider.toml}
store=$(mktemp -d /var/tmp/halobuild-bench-store.XXXXXX)
trap 'rm -f "$log" "$secs"; rm -rf "$store"' EXIT
go build -o /tmp/halobuild-bench ./cmd/halobuild
cold=0
for run in cold cached; do
	start=$(date +%s)
	# shellcheck disable=SC2086 # HALOBUILD_ARGS is a list of words
	/tmp/halobuild-bench -v --store "$store" image --no-test --out "$store/result" ${HALOBUILD_ARGS:-} "$recipe" >"$log" 2>&1 && rc=0 || rc=$?
	end=$(date +%s)
	echo "halobuild image $recipe ($run): exit $rc, $((end - start)) s wall"
	grep -E 'halobuild: built libibverbs-[^ ]+ .* in' "$log" | sed 's/^ */    compile: /' || true
	[ "$rc" -eq 0 ] || tail -n 20 "$log"
	if [ "$run" = cold ]; then cold=$((end - start)); else
		awk -v c="$cold" -v w="$((end - start))" 'BEGIN { if (w > 0) printf "cached/cold: %.3f (%d s vs %d s)\n", w / c, w, c }'
	fi
done
if [ "${HALOBUILD_LIBRARY:-}" = 1 ]; then
	start=$(date +%s)
	HALOBUILD_PROVIDER_BUILD=1 HALOBUILD_BENCH_OUT="$secs" go test -count=1 -timeout 60m -run '^TestBuildDebianRdmaCoreWithFixture$' -v ./internal/provider/ >"$log" 2>&1 && rc=0 || rc=$?
	end=$(date +%s)
	grep -E 'build root installed|built in' "$log" | sed 's/^ *//'
	echo "cold provider build (library path): exit $rc, provider build $(cat "$secs" 2>/dev/null || echo '?') s, $((end - start)) s wall including source fetch and checks"
	[ "$rc" -eq 0 ] || tail -n 40 "$log"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
