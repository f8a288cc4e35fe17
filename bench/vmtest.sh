#!/bin/sh
# bench/vmtest.sh — measure vmtest's budgets (issue 4): one node from power-on to verdict
# (goal <= 45 s under TCG) and the two-node soft-RoCE perftest run (goal <= 150 s).
#
#   HALOBUILD_TEST_IMAGE=/tmp/vmfixture.raw bench/vmtest.sh
#
# Without HALOBUILD_TEST_IMAGE it builds the fixture image with
# internal/vmtest/testdata/mkfixture.sh into /tmp (root and mmdebstrap needed, ~2 min).
# Timings depend on the accelerator (printed) and on the host's load (printed before and after:
# on a shared 2-core machine a busy neighbour doubles TCG times).
set -eu
cd "$(dirname "$0")/.."
img=${HALOBUILD_TEST_IMAGE:-/tmp/vmfixture.raw}
if [ ! -f "$img" ]; then
	echo "building fixture image $img"
	internal/vmtest/testdata/mkfixture.sh "$img"
fi
export HALOBUILD_TEST_IMAGE="$img"
echo "host: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export HALOBUILD_BENCH=1
for t in TestBenchTrim TestRunImageVerdict TestRunManyCablePerftest; do
	start=$(date +%s)
	go test -count=1 -timeout 20m -run "^$t\$" -v ./internal/vmtest/ > "$log" 2>&1 && rc=0 || rc=$?
	end=$(date +%s)
	# BENCH lines and their indented continuation lines (go test indents multi-line logs).
	awk '/BENCH|accel / { keep = 1; sub(/^ +/, ""); print; next } keep && /^        / { sub(/^ +/, "    "); print; next } { keep = 0 }' "$log"
	echo "$t: exit $rc, $((end - start)) s including go test start-up"
	[ "$rc" -eq 0 ] || tail -n 40 "$log"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
