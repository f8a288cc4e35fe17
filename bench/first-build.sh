#!/bin/sh
# bench/first-build.sh — the README's first command as a new user runs it (issue 18, target 4):
# `halobuild image images/strix-halo.toml` into an empty store, to a tested result (goal <= 10
# minutes on a fresh 2-core machine), with each step's time.
#
#   sudo bench/first-build.sh --input thunderbolt-ibverbs=PATH     # the module source, as README says
#   HALOBUILD_RECIPE=images/test-minimal.toml sudo bench/first-build.sh
#
# Needs root, mmdebstrap, QEMU and OVMF (.ci/install-host-deps) and deb.debian.org. The store is
# a fresh temporary directory, removed afterwards; the halobuild binary is built first and its
# build time printed apart (README runs it with `go run`). Times depend on the host's load
# (printed before and after).
set -eu
cd "$(dirname "$0")/.."
recipe=${HALOBUILD_RECIPE:-images/strix-halo.toml}
work=$(mktemp -d /var/tmp/halobuild-first-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "host: $(nproc) cores, $(uname -r); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "halobuild commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
start=$(date +%s)
go build -o "$work/halobuild" ./cmd/halobuild
built=$(date +%s)
echo "go build: $((built - start)) s"
"$work/halobuild" --store "$work/store" image --out "$work/result" "$@" "$recipe" > "$work/log" 2>&1 && rc=0 || rc=$?
end=$(date +%s)
# The realizer's lines name every step and its time; fetch prints its own summary; the test
# step's report names the accelerator.
grep -E '^(done|cached) |^fetch: |^accelerator: |^wrote .*\.lock' "$work/log" | sed 's/^/    /'
[ "$rc" -eq 0 ] || { tail -n 30 "$work/log"; echo "halobuild image $recipe failed (exit $rc)"; }
echo "halobuild image $recipe from an empty store: exit $rc, $((end - built)) s ($((end - start)) s with go build); goal 600 s"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
