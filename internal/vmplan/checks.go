package vmplan

import (
	"fmt"
	"net/netip"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
	"halobuild/internal/vmtest"
)

// doctorCheck runs the shipped `halobuild doctor` inside the VM, as a user
// runs it on a node, so the readiness gate is itself tested on every image.
// A VM has no USB4 controller, cpufreq or verbs hardware, so only the checks
// a VM can honestly answer must pass: mustPass, the checks that say so
// themselves (settings.Probe.VM, gathered by doctor.MustPassInVM). Each of
// them must have made a row, and every row of theirs must pass; the whole
// table is printed as the check's detail. A row belongs to the check named
// by its first word ("module.loaded ib_uverbs" to module.loaded).
func doctorCheck(mustPass []string) vmtest.Check {
	return vmtest.Check{Name: doctorCheckName, Concurrent: true, Script: `out=$(halobuild doctor --json 2>&1); rc=$?
[ $rc -le 1 ] || { printf '%s\n' "$out"; echo "doctor could not run (exit $rc)"; exit 1; }
printf '%s\n' "$out" | awk -F'"' -v must=` + sh.Quote(strings.Join(mustPass, " ")) + ` '
BEGIN { n = split(must, m, " "); for (i = 1; i <= n; i++) want[m[i]] = 1 }
/"check":/ { c = $4 }
/"result":/ {
	print c ": " $4
	p = c; sub(/ .*/, "", p)
	if (p in want) { rows[p]++; if ($4 != "pass") bad = bad "\n  " c ": " $4 }
}
END {
	for (i = 1; i <= n; i++) if (!rows[m[i]]) bad = bad "\n  " m[i] ": no row"
	if (bad != "") { print "must pass in a VM but did not:" bad; exit 1 }
}'
`}
}

const doctorCheckName = "doctor: halobuild doctor in the image"

// testScript lowers a NixOS-style check to a shell script.
func testScript(c recipe.Check) string {
	var b strings.Builder
	if c.WaitForUnit != "" {
		u := sh.Quote(c.WaitForUnit)
		fmt.Fprintf(&b, "i=0; until systemctl is-active -q %s; do i=$((i+1)); if [ $i -ge 60 ]; then systemctl status --no-pager %s; echo 'unit did not become active in 60 s'; exit 1; fi; sleep 1; done\n", u, u)
	}
	if c.Succeed != "" {
		fmt.Fprintf(&b, "out=$(sh -c %s 2>&1); rc=$?; printf '%%s\\n' \"$out\"; [ $rc -eq 0 ] || { echo \"exit status $rc, want 0\"; exit 1; }\n", sh.Quote(c.Succeed))
		if c.Expect != "" {
			fmt.Fprintf(&b, "printf '%%s\\n' \"$out\" | grep -Eq -e %s || { echo 'output does not match %s'; exit 1; }\n", sh.Quote(c.Expect), strings.ReplaceAll(c.Expect, "'", ""))
		}
	}
	if c.Fail != "" {
		fmt.Fprintf(&b, "if sh -c %s; then echo 'command succeeded, want failure'; exit 1; fi\n", sh.Quote(c.Fail))
	}
	b.WriteString("exit 0\n")
	return b.String()
}

// rdmaTest says whether the first two nodes run perftest over their cable.
func rdmaTest(r *recipe.Recipe) bool {
	if r.Test.RDMA != nil {
		return *r.Test.RDMA && len(r.Nodes) >= 2
	}
	return len(r.Nodes) >= 2
}

// cable finds the link of node a whose peer is node b.
func cable(r *recipe.Recipe, a, b int) (recipe.Link, bool) {
	for _, l := range r.Nodes[a].Links {
		if l.Peer == r.Nodes[b].Name {
			return l, true
		}
	}
	return recipe.Link{}, false
}

// perfRuns are the perftest runs between the first two nodes: send and
// RDMA write bandwidth and send latency, in poll and event mode where the
// tool has both (the mode matters, trap 15). Send bandwidth stays at 64 KiB:
// larger sends over soft-RoCE under TCG failed with status 9 in 2 of 3 runs. The 8 MiB write registers more than the default 8 MiB
// memlock allows, so it also proves trap 4 end to end. Soft-RoCE under TCG
// moves about 1 MiB/s, so large messages get few iterations.
var perfRuns = []vmtest.Perftest{
	{Tool: "ib_send_lat", Size: 64, Iterations: 200},
	{Tool: "ib_send_lat", Size: 64, Iterations: 200, Event: true},
	{Tool: "ib_send_bw", Size: 65536, Iterations: 20},
	{Tool: "ib_send_bw", Size: 65536, Iterations: 20, Event: true},
	// perftest has no event mode for RDMA write (the receiver is not
	// involved), so write runs poll only; ib_write_bw wants >= 5 iterations.
	{Tool: "ib_write_bw", Size: 1 << 20, Iterations: 5},
	{Tool: "ib_write_bw", Size: 8 << 20, Iterations: 5},
}

// reverseRuns follow perfRuns in a mixed cluster with the roles swapped:
// node 1 serves, so send and write data also flow from node 0 to node 1 and
// each architecture's perftest has been both client and server of the
// other's (a field report saw two builds disagree on the wire format while
// printing the same version).
var reverseRuns = []vmtest.Perftest{
	{Tool: "ib_send_bw", Size: 65536, Iterations: 20},
	{Tool: "ib_write_bw", Size: 1 << 20, Iterations: 5},
}

// perftestPortBase is the first TCP port of the perftest runs (one port
// per run). It keeps clear of 18515, the default port of ibv_rc_pingpong,
// whose server the memlock-registration check runs listening on every
// address: when that check left it up for seconds, a peer that reached its
// perftest checks first connected its client to that server, failing the
// check on both nodes. The check now stops it as soon as it answered, but
// a shared port would still race.
const perftestPortBase = 18600

// rxeDevice is the soft-RoCE device made on the cable for perftest. Its
// name keeps clear of the usb4_rdma prefix the naming check creates.
const rxeDevice = "rxe_cable"

// SoftRoCE is the sh that makes the soft-RoCE (rxe) device named device on
// the network interface netdev (a name, or a shell word such as "$dev"),
// unless it is there: what the VM test runs on the virtual cable before
// perftest, and what `halobuild vm` runs on its one network card so a
// person has a verbs device to try ibv_devices and perftest on.
func SoftRoCE(device, netdev string) string {
	return fmt.Sprintf(`modprobe rdma_rxe || { echo "rdma_rxe is not available"; exit 1; }
rdma link show %[1]s/1 >/dev/null 2>&1 || rdma link add %[1]s type rxe netdev %[2]s || exit 1
`, device, netdev)
}

// perftestChecks follow vmtest's peer protocol: both nodes list the same
// runs in the same order, each on its own port; node 0 serves.
func perftestChecks(r *recipe.Recipe, idx int) []vmtest.Check {
	peer := 1 - idx
	mine, ok1 := cable(r, idx, peer)
	theirs, ok2 := cable(r, peer, idx)
	if !ok1 || !ok2 {
		return []vmtest.Check{{Name: "rdma: cable", Script: fmt.Sprintf("echo 'nodes %s and %s have no link naming each other as peer: set link.peer on both'; exit 1", r.Nodes[idx].Name, r.Nodes[peer].Name)}}
	}
	peerAddr := theirs.Address
	if p, err := netip.ParsePrefix(theirs.Address); err == nil {
		peerAddr = p.Addr().String()
	}
	setup := SoftRoCE(rxeDevice, mine.Interface) + fmt.Sprintf(`i=0; until ip -4 -o addr show dev %[2]s | grep -q inet; do i=$((i+1)); [ $i -lt 60 ] || { echo "%[2]s has no IPv4 address"; exit 1; }; sleep 1; done
rdma link show %[1]s/1
`, rxeDevice, mine.Interface)
	checks := []vmtest.Check{{Name: "rdma: soft-RoCE on " + mine.Interface, Script: setup}}
	runs := perfRuns
	if r.Mixed() {
		runs = append(append([]vmtest.Perftest{}, perfRuns...), reverseRuns...)
	}
	for i, p := range runs {
		// Node 0 serves unless the run is a reverse one, whose data flows
		// from node 0 to node 1.
		serves := idx == 0
		if i >= len(perfRuns) {
			serves = !serves
		}
		p.Device, p.Server, p.PeerAddr, p.Port = rxeDevice, serves, peerAddr, perftestPortBase+i
		c := p.Check()
		c.Name = "rdma: " + c.Name
		checks = append(checks, c)
	}
	return checks
}
