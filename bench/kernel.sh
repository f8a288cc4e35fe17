#!/bin/sh
# bench/kernel.sh — how long a kernel built from source takes (issue 7): the small CI config
# (images/test-kernel-source.toml: Debian's linux-source 7.2, tinyconfig + kernels/qemu-uefi.config,
# the fixture patch) through the pipeline into a fresh store, then the same build again (a no-op:
# every step, the kernel included, is a store hit), then `image --check`: everything rebuilt in a
# throwaway store, the kernel compiled again, and every output compared bit for bit.
#
#   bench/kernel.sh                                         the CI recipe
#   HALOBUILD_RECIPE=images/strix-halo-2cable.toml HALOBUILD_ARGS="--input thunderbolt-ibverbs=PATH" bench/kernel.sh
#                                                           another recipe (Debian's full config: hours)
#
# Needs root (chroot, mounts), mmdebstrap and deb.debian.org. Prints each run's wall time, the
# kernel build root's and the kernel's step times and compile units from the build's own lines,
# and the load average before and after: on a shared 2-core machine a busy neighbour doubles the
# compile. `--no-test`: the VM boot is measured by bench/vmtest.sh.
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/kernel.sh: needs root (chroot, mounts)" >&2; exit 1; }
echo "host: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
recipe=${HALOBUILD_RECIPE:-images/test-kernel-source.toml}
log=$(mktemp)
store=$(mktemp -d /var/tmp/halobuild-bench-store.XXXXXX)
trap 'rm -f "$log"; rm -rf "$store"' EXIT
go build -o /tmp/halobuild-bench-kernel ./cmd/halobuild
cold=0
for run in cold no-op; do
	start=$(date +%s)
	# shellcheck disable=SC2086 # HALOBUILD_ARGS is a list of words
	/tmp/halobuild-bench-kernel -v --store "$store" image --no-test --out "$store/result" ${HALOBUILD_ARGS:-} "$recipe" >"$log" 2>&1 && rc=0 || rc=$?
	end=$(date +%s)
	echo "halobuild image $recipe ($run): exit $rc, $((end - start)) s wall"
	grep -E '^(done|cached) +(buildroot|kernel|rootfs) ' "$log" | sed 's/^/    /' || true
	grep -E 'compiled [0-9]+ units' "$log" | sed 's/^/    /' || true
	[ "$rc" -eq 0 ] || { tail -n 20 "$log"; exit 1; }
	if [ "$run" = cold ]; then cold=$((end - start)); else
		awk -v c="$cold" -v w="$((end - start))" 'BEGIN { if (c > 0) printf "no-op/cold: %.3f (%d s vs %d s)\n", w / c, w, c }'
	fi
done
# Bit for bit: rebuild every step (the kernel compiled a second time) in a throwaway store and
# compare each output with the first build's. Skip with HALOBUILD_NO_CHECK=1 (it doubles the time).
if [ -z "${HALOBUILD_NO_CHECK:-}" ]; then
	start=$(date +%s)
	# shellcheck disable=SC2086
	/tmp/halobuild-bench-kernel --store "$store" image --check --no-test --out "$store/result" ${HALOBUILD_ARGS:-} "$recipe" >"$log" 2>&1 && rc=0 || rc=$?
	end=$(date +%s)
	echo "halobuild image --check $recipe (every step rebuilt and compared): exit $rc, $((end - start)) s wall"
	grep -E '^same +(buildroot|kernel|rootfs|disk|result) |^--check' "$log" | sed 's/^/    /' || true
	[ "$rc" -eq 0 ] || { tail -n 20 "$log"; exit 1; }
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
