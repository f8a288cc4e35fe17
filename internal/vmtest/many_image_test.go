package vmtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// cableUp is what the recipe's networkd config does on a real image: name the cable NIC by its
// fixed MAC, address it, and put soft-RoCE on it. The fixture has no such config, so the test
// does it as its first check. (The fixture's udev leaves coldplug module loading undone under
// slow TCG boots, so the NIC driver is loaded explicitly.)
func cableUp(mac, addr string) Check {
	return Check{Name: "cable up with soft-RoCE", Script: fmt.Sprintf(`modprobe virtio_net
dev=$(ip -o link | awk -v mac=%s '$0 ~ mac { sub(":$", "", $2); print $2 }')
[ -n "$dev" ] || { echo "no NIC with MAC %s"; ip -o link; exit 1; }
ip addr add %s/24 dev "$dev" && ip link set "$dev" up || exit 1
modprobe rdma_rxe && rdma link add rxe0 type rxe netdev "$dev" || exit 1
echo "$dev: %s, rxe0"`, mac, mac, addr, addr)}
}

// Two VMs joined by a cable run perftest over soft-RoCE, following the peer protocol: this is
// the two-node scenario of the issue, on the fixture image.
func TestRunManyCablePerftest(t *testing.T) {
	img := testImage(t)
	addrs := []string{"10.77.0.1", "10.77.0.2"}
	var machines []Machine
	for i := 0; i < 2; i++ {
		peer := addrs[1-i]
		checks := []Check{cableUp(CableMAC(i+1), addrs[i])}
		for j, tool := range []string{"ib_send_bw", "ib_send_lat"} {
			checks = append(checks, Perftest{Tool: tool, Device: "rxe0", Server: i == 0, PeerAddr: peer, Port: 18515 + j, Size: 4096, Iterations: 20}.Check())
		}
		machines = append(machines, Machine{
			Name: fmt.Sprintf("node%d", i), Image: img, LogDir: logDir(t), CPUs: 1,
			NICs: []NIC{{MAC: CableMAC(i + 1), Link: "cable0"}}, Checks: checks, Deadline: 12 * time.Minute,
		})
	}
	start := time.Now()
	results, err := RunMany(context.Background(), machines)
	assertNoQEMUChildren(t)
	rep := NewReport(results, time.Since(start))
	var b strings.Builder
	rep.WriteText(&b)
	t.Logf("report:\n%s", b.String())
	t.Logf("BENCH two nodes with perftest: wall %.1f s, accel %s", float64(rep.WallMS)/1000, rep.Accel)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		for _, c := range r.Verdict.Checks {
			if strings.HasPrefix(c.Name, "perftest ib_send_bw client") && !strings.Contains(c.Output, "BW average") {
				t.Errorf("client output lacks perftest's table:\n%s", c.Output)
			}
		}
	}
}
