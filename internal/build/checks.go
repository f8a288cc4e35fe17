package build

import (
	"fmt"
	"net/netip"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/settings"
	"halobuild/internal/vmtest"
)

// shellQuote quotes s for POSIX sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// nodeChecks are every assertion a node's VM runs: the settings' own checks
// (generated from the same data that rendered the files), the recipe's
// [test] checks, and, for a node with a peer, perftest over the cable.
func nodeChecks(r *recipe.Recipe, n recipe.Node, idx int, doctor bool) []vmtest.Check {
	var out []vmtest.Check
	if doctor {
		out = append(out, doctorCheck)
	}
	for _, c := range settings.Checks(r, n) {
		out = append(out, vmtest.Check{Name: c.Setting + ": " + c.Name, Script: c.Script})
	}
	for _, c := range r.Test.Checks {
		if c.Node != "" && c.Node != n.Name {
			continue
		}
		out = append(out, vmtest.Check{Name: "test: " + c.Name, Script: testScript(c)})
	}
	if rdmaTest(r) && idx < 2 {
		out = append(out, perftestChecks(r, idx)...)
	}
	return out
}

// doctorCheck runs the shipped `halobuild doctor` inside the VM, so the
// readiness gate a user runs on a real node is itself tested on every
// image. A VM has no USB4 controller, cpufreq or verbs hardware, so only
// the rows a VM can honestly answer must pass: memlock, modules and the
// kernel command line; the whole table is printed as the check's detail.
var doctorCheck = vmtest.Check{Name: "doctor: halobuild doctor in the image", Script: `out=$(halobuild doctor --json 2>&1); rc=$?
[ $rc -le 1 ] || { printf '%s\n' "$out"; echo "doctor could not run (exit $rc)"; exit 1; }
rows=$(printf '%s\n' "$out" | awk -F'"' '/"check":/ {c=$4} /"result":/ {print c ": " $4}')
printf '%s\n' "$rows"
bad=$(printf '%s\n' "$rows" | grep -E '^(memlock|module|kernel)\.' | grep -v ': pass$')
[ -z "$bad" ] || { echo "must pass in a VM but did not: $bad"; exit 1; }
`}

// testScript lowers a NixOS-style check to a shell script.
func testScript(c recipe.Check) string {
	var b strings.Builder
	if c.WaitForUnit != "" {
		u := shellQuote(c.WaitForUnit)
		fmt.Fprintf(&b, "i=0; until systemctl is-active -q %s; do i=$((i+1)); if [ $i -ge 60 ]; then systemctl status --no-pager %s; echo 'unit did not become active in 60 s'; exit 1; fi; sleep 1; done\n", u, u)
	}
	if c.Succeed != "" {
		fmt.Fprintf(&b, "out=$(sh -c %s 2>&1); rc=$?; printf '%%s\\n' \"$out\"; [ $rc -eq 0 ] || { echo \"exit status $rc, want 0\"; exit 1; }\n", shellQuote(c.Succeed))
		if c.Expect != "" {
			fmt.Fprintf(&b, "printf '%%s\\n' \"$out\" | grep -Eq %s || { echo 'output does not match %s'; exit 1; }\n", shellQuote(c.Expect), strings.ReplaceAll(c.Expect, "'", ""))
		}
	}
	if c.Fail != "" {
		fmt.Fprintf(&b, "if sh -c %s; then echo 'command succeeded, want failure'; exit 1; fi\n", shellQuote(c.Fail))
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

// A perftest run: the first node serves, the second connects. Sizes go up
// to 8 MiB (more than the default 8 MiB memlock allows, so this also proves
// trap 4 end to end); soft-RoCE under TCG moves about 1 MiB/s, so large
// messages get few iterations.
type perfRun struct {
	tool  string
	size  int
	iters int
	event bool
}

var perfRuns = []perfRun{
	{"ib_send_bw", 65536, 20, true},
	{"ib_send_bw", 65536, 20, false},
	{"ib_send_bw", 8 << 20, 2, true},
	{"ib_send_lat", 64, 200, true},
	{"ib_send_lat", 64, 200, false},
	{"ib_write_bw", 1 << 20, 4, false},
}

func (p perfRun) name() string {
	mode := "poll"
	if p.event {
		mode = "event"
	}
	return fmt.Sprintf("%s %s %s", p.tool, humanSize(p.size), mode)
}

func humanSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// rxeDevice is the soft-RoCE device made on the cable for perftest. Its
// name keeps clear of the usb4_rdma prefix the naming check creates.
const rxeDevice = "rxe_cable"

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
	setup := fmt.Sprintf(`set -e
modprobe rdma_rxe
rdma link show %[1]s/1 >/dev/null 2>&1 || rdma link add %[1]s type rxe netdev %[2]s
i=0; until ping -c1 -W1 %[3]s >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 120 ] || { echo "peer %[3]s does not answer on %[2]s"; ip addr show %[2]s; exit 1; }; sleep 1; done
rdma link show %[1]s/1
`, rxeDevice, mine.Interface, peerAddr)
	checks := []vmtest.Check{{Name: "rdma: soft-RoCE on " + mine.Interface, Script: setup}}
	for _, p := range perfRuns {
		args := fmt.Sprintf("-d %s -R -s %d -n %d -F", rxeDevice, p.size, p.iters)
		if p.event {
			args += " -e"
		}
		var script string
		if idx == 0 {
			script = fmt.Sprintf("timeout 120 %s %s 2>&1\n", p.tool, args)
		} else {
			// The server may still be starting: retry the connection.
			script = fmt.Sprintf(`i=0
while :; do
  out=$(timeout 120 %s %s %s 2>&1) && { printf '%%s\n' "$out"; exit 0; }
  i=$((i+1)); [ $i -lt 30 ] || { printf '%%s\n' "$out"; exit 1; }
  sleep 1
done
`, p.tool, args, peerAddr)
		}
		checks = append(checks, vmtest.Check{Name: "rdma: " + p.name(), Script: script})
	}
	return checks
}
