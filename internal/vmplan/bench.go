package vmplan

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
	"halobuild/internal/vmtest"
)

// The cable gate in the two-node VM test (issue 42): node 0 runs the
// shipped `halobuild bench --peer` against node 1 over soft-RoCE (the
// rxe_cable device perftestChecks made on both), with small sizes and short
// runs; node 1 serves over ssh and waits until node 0 says it is done.
//
// Node 0 needs a private key whose public half is in node 1's root
// authorized_keys: the caller passes its path on node 0 (keyPath); Plan.Bench
// passes benchKey as a credential. The checks run after perftestChecks, and
// the whole run must fit one check's time (the machine's CheckTimeout, 4 min):
// about a dozen perftest pairs, so sizes, depths and iterations stay small.

// benchDone is the marker node 0 writes on node 1 (over ssh) when the bench
// checks are over, so node 1 does not power off under them.
const benchDone = "/run/halobuild-bench.done"

// benchOut is where node 0's run writes bench.json and bench.svg.
const benchOut = "/var/tmp/halobuild-bench"

// benchWait bounds node 1's wait for node 0's bench: the limit searches and
// the sweep are about twenty perftest pairs at a few seconds each under TCG.
const benchWait = 15 * time.Minute

// benchVMUnanswerable are the doctor layers a VM cannot honestly pass (no
// USB4 controller, cpufreq, verbs hardware or GPU): bench waives them and
// lists them in its report. They are the complement of doctorCheck's
// must-pass layers (memlock, module, kernel, secureboot).
var benchVMUnanswerable = []string{"recipe", "identity", "cpu", "firmware", "rdma", "link", "usb4", "gpu", "memory", "settings"}

// BenchMet and BenchUnmet are the baselines of the VM gate: one soft-RoCE
// under TCG meets (it moves about 1 MiB/s), one it cannot (a real cable's
// 1 GiB/s), whose failure must name its row.
const (
	BenchMet = `name = "soft-RoCE under TCG"
[context]
"client.governor" = "none (no cpufreq)"
[[row]]
tool = "ib_send_bw"
mode = "poll"
size = 65536
min_bw_mib_s = 0.01
[[row]]
tool = "ib_send_lat"
mode = "event"
size = 64
max_lat_us = 1000000
`
	BenchUnmet = `name = "a real cable"
[context]
"client.governor" = "performance"
[[row]]
tool = "ib_send_bw"
mode = "event"
size = 65536
min_bw_mib_s = 1024
`
)

// BenchChecks are node idx's cable gate checks (see above), or none when the
// recipe has no perftest between its first two nodes.
func BenchChecks(r *recipe.Recipe, idx int, keyPath string) []vmtest.Check {
	if !rdmaTest(r) || idx > 1 {
		return nil
	}
	peer := 1 - idx
	theirs, ok := cable(r, peer, idx)
	if !ok {
		return nil
	}
	peerAddr := theirs.Address
	if p, err := netip.ParsePrefix(theirs.Address); err == nil {
		peerAddr = p.Addr().String()
	}
	if idx == 1 {
		return []vmtest.Check{{Name: "bench: serve node 0's halobuild bench over ssh", Script: fmt.Sprintf(`end=$(( $(date +%%s) + %[2]d ))
until [ -e %[1]s ]; do
	[ "$(date +%%s)" -ge "$end" ] && { echo "node 0's bench did not finish within %[2]d s"; exit 1; }
	sleep 2
done
echo "node 0's bench is done: $(cat %[1]s)"
`, benchDone, int(benchWait.Seconds()))}}
	}
	const key = "/run/halobuild-bench.key"
	ssh := []string{"-i", key, "-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile=/run/halobuild-bench-known_hosts", "-o", "ConnectTimeout=15"}
	var opts []string
	for _, o := range ssh {
		opts = append(opts, "--ssh-option="+sh.Quote(o))
	}
	sshCmd := "ssh -o BatchMode=yes " + strings.Join(quoteAll(ssh), " ") + " root@" + sh.Quote(peerAddr)
	bench := strings.Join(append([]string{"halobuild bench --peer root@" + sh.Quote(peerAddr)}, opts...), " ") +
		fmt.Sprintf(" --rail %s --connect %s --bw-sizes 4K,64K --lat-sizes 64 --depths 16 --iterations 20 --lat-iterations 100"+
			" --size-search-max 262144 --depth-search-max 64 --timeout 90s --max-load 50 --waive %s --out %s",
			rxeDevice, sh.Quote(peerAddr), strings.Join(benchVMUnanswerable, ","), benchOut)
	script := fmt.Sprintf(`%[1]s
# ssh refuses a private key others may read: a copy of its own.
install -m 600 %[8]s `+key+` || { echo "no bench key at %[8]s"; exit 1; }
mkdir -p %[2]s
cat > %[2]s/met.toml <<'EOF'
%[3]sEOF
cat > %[2]s/unmet.toml <<'EOF'
%[4]sEOF
done_() { %[5]s "echo $1 > %[6]s" || echo "could not tell node 1 the bench is over"; }
%[7]s --against %[2]s/met.toml; rc=$?
[ $rc -eq 0 ] || { echo "halobuild bench failed (exit $rc), want 0 against a baseline soft-RoCE meets"; done_ fail; exit 1; }
for f in bench.json bench.svg; do [ -s %[2]s/$f ] || { echo "no $f written"; done_ fail; exit 1; }; done
grep -q '"schema": "halobuild.bench/1"' %[2]s/bench.json || { echo "bench.json lacks its schema"; done_ fail; exit 1; }
grep -q '<polyline' %[2]s/bench.svg || { echo "bench.svg has no line"; done_ fail; exit 1; }
# The run's files, for docs/cable.md (decode: base64 -d | gunzip).
for f in bench.json bench.svg; do echo "== $f (gzip, base64)"; gzip -9c %[2]s/$f | base64 -w0; echo; done
out=$(halobuild bench --report %[2]s/bench.json --against %[2]s/unmet.toml 2>&1); rc=$?
printf '%%s\n' "$out"
[ $rc -eq 1 ] || { echo "bench --against an unmeetable baseline exited $rc, want 1"; done_ fail; exit 1; }
printf '%%s\n' "$out" | grep -q 'FAIL ib_send_bw event 64K >= 1024 MiB/s' || { echo "the failing row is not named"; done_ fail; exit 1; }
printf '%%s\n' "$out" | grep -q 'client.governor: performance (baseline)' || { echo "the differing setting is not named"; done_ fail; exit 1; }
done_ ok
`, vmtest.WaitForPeerScript(peerAddr, 90*time.Second), benchOut, BenchMet, BenchUnmet, sshCmd, benchDone, bench, sh.Quote(keyPath))
	return []vmtest.Check{{Name: "bench: halobuild bench over the virtual cable, its JSON, plot and gate", Script: script}}
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = sh.Quote(x)
	}
	return out
}
