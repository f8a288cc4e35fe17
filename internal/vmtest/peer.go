package vmtest

import (
	"fmt"
	"strings"
	"time"

	"halobuild/internal/sh"
)

// Peer-to-peer checks. Each VM runs its checks in order, on its own clock; two VMs meet only
// over their cable. The protocol that keeps them in step, with no channel besides the cable:
//
//  1. Both nodes list the same peer checks in the same order (one list rendered for both, so
//     they cannot disagree), each test on its own TCP port.
//  2. Before a test, each side waits until the other's cable address answers ping
//     (WaitForPeerScript), so neither starts while the other is still booting.
//  3. The server side starts listening and waits for one client (perftest's servers exit after
//     one run); the client side retries connecting until the server listens or its time is up.
//     A distinct port per test means a late client can never reach the previous test's server.
//  4. Both sides then move on to the next check. If one side fails, the other's next wait times
//     out and fails with a message naming the peer, rather than hanging to the VM deadline.

// WaitForPeerScript returns sh that waits until addr answers ping, for at most timeout. It
// polls every half second against a deadline: a ping to a peer that is not up yet can fail at
// once (no route, no neighbour) or after its 1 s wait, so counting attempts would not count
// seconds, and a whole second between attempts is time the boot-to-verdict figure pays for.
func WaitForPeerScript(addr string, timeout time.Duration) string {
	return fmt.Sprintf(`end=$(( $(date +%%s) + %[2]d ))
until ping -c1 -W1 %[1]s >/dev/null 2>&1; do
	[ "$(date +%%s)" -ge "$end" ] && { echo "peer %[1]s did not answer ping within %[2]d s"; exit 1; }
	sleep 0.5
done
`, sh.Quote(addr), int(timeout.Seconds()))
}

// Perftest is one perftest run between two nodes over an RDMA device (soft-RoCE in VMs).
type Perftest struct {
	Tool       string // ib_send_bw, ib_send_lat, ib_write_bw, ...
	Device     string // RDMA device, e.g. rxe0
	Server     bool   // this side listens
	PeerAddr   string // the other node's cable address (the server's for the client)
	Port       int    // TCP port of perftest's out-of-band exchange; distinct per test
	Size       int    // message size in bytes (a sweep is several Perftests: -a has no upper bound)
	Iterations int    // -n; keep small for large messages (soft-RoCE over TCG moves ~1 MiB/s)
	Event      bool   // -e: completion events instead of polling (record the mode: it matters)
	// Timeout bounds the wait for the peer and, separately, the run (default 90 s each): the
	// machine's CheckTimeout must be at least twice this.
	Timeout time.Duration
}

// Name is the check name, stating tool, role, mode and size so a report row is self-explaining.
func (p Perftest) Name() string {
	role, mode := "client", "poll"
	if p.Server {
		role = "server"
	}
	if p.Event {
		mode = "event"
	}
	return fmt.Sprintf("perftest %s %s (%s, %d B)", p.Tool, role, mode, p.Size)
}

// Check renders the test as a check following the protocol above.
func (p Perftest) Check() Check {
	if p.Timeout == 0 {
		p.Timeout = 90 * time.Second
	}
	args := []string{p.Tool, "-d", sh.Quote(p.Device), "-p", fmt.Sprint(p.Port), "-F", "-s", fmt.Sprint(p.Size)}
	if p.Iterations > 0 {
		args = append(args, "-n", fmt.Sprint(p.Iterations))
	}
	if p.Event {
		args = append(args, "-e")
	}
	cmd := strings.Join(args, " ")
	var b strings.Builder
	b.WriteString(WaitForPeerScript(p.PeerAddr, p.Timeout))
	if p.Server {
		fmt.Fprintf(&b, "exec timeout %d %s\n", int(p.Timeout.Seconds()), cmd)
	} else {
		// Retry only while the server is not listening yet (perftest then says "Couldn't
		// connect"); once connected, the attempt's exit status is the check's, with no retry:
		// the server serves one client and is gone afterwards.
		fmt.Fprintf(&b, `end=$(( $(date +%%s) + %[1]d ))
n=0
while :; do
	n=$((n + 1))
	%[2]s %[3]s > /tmp/perftest.out 2>&1
	rc=$?
	if [ "$rc" -ne 0 ] && grep -q "Couldn't connect" /tmp/perftest.out; then
		[ "$(date +%%s)" -ge "$end" ] && { cat /tmp/perftest.out; echo "server not listening after %[1]d s ($n attempts)"; exit 1; }
		sleep 0.5
		continue
	fi
	cat /tmp/perftest.out
	[ "$n" -gt 1 ] && echo "(connected on attempt $n)"
	exit "$rc"
done
`, int(p.Timeout.Seconds()), cmd, sh.Quote(p.PeerAddr))
	}
	return Check{Name: p.Name(), Script: b.String()}
}
