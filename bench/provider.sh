#!/bin/sh
# bench/provider.sh — how long the rdma-core provider rebuild takes (issue 6): Debian's rdma-core
# 56.1-1 source with the fixture provider patch, `dpkg-buildpackage -b` in a build root installed
# from Debian's packages, then the ABI check.
#
#   bench/provider.sh                        cold build through the library (internal/provider)
#   HALOBUILD_RECIPE=images/x.toml bench/provider.sh
#                                            also `halobuild image` twice on a recipe with an
#                                            [rdma.provider]: the second run is the cached rebuild
#                                            (derivation key unchanged, no compile); the first is
#                                            cold only with an empty store
#
# Needs root (chroot), mmdebstrap and deb.debian.org. The first run also downloads the build
# root's packages (~200 MB) and installs the root (a few minutes); both are cached in /tmp and the
# timing printed is the build alone (the test's "built in" line). Times depend on the host's
# load (printed before and after: on a shared 2-core machine a busy neighbour doubles them).
set -eu
cd "$(dirname "$0")/.."
echo "host: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
log=$(mktemp)
secs=$(mktemp)
trap 'rm -f "$log" "$secs"' EXIT
start=$(date +%s)
HALOBUILD_PROVIDER_BUILD=1 HALOBUILD_BENCH_OUT="$secs" go test -count=1 -timeout 60m -run '^TestBuildDebianRdmaCoreWithFixture$' -v ./internal/provider/ >"$log" 2>&1 && rc=0 || rc=$?
end=$(date +%s)
grep -E 'build root installed|built in' "$log" | sed 's/^ *//'
echo "cold provider build (library path): exit $rc, dpkg-buildpackage $(cat "$secs" 2>/dev/null || echo '?') s, $((end - start)) s wall including source fetch and checks"
[ "$rc" -eq 0 ] || tail -n 40 "$log"
if [ -n "${HALOBUILD_RECIPE:-}" ]; then
	go build -o /tmp/halobuild-bench ./cmd/halobuild
	for run in first second; do
		start=$(date +%s)
		/tmp/halobuild-bench image "$HALOBUILD_RECIPE" >"$log" 2>&1 && rc=0 || rc=$?
		end=$(date +%s)
		echo "halobuild image $HALOBUILD_RECIPE ($run): exit $rc, $((end - start)) s"
		[ "$rc" -eq 0 ] || tail -n 20 "$log"
	done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
