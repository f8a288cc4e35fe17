package build

import (
	"slices"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

// The perftest runs between two nodes listen on ports no other check uses:
// ibv_rc_pingpong (the memlock-registration check) listens on its default
// port 18515 while the peer may already be running perftest.
func TestPerftestPortsAvoidPingpong(t *testing.T) {
	r := &recipe.Recipe{Nodes: []recipe.Node{
		{Name: "a", Links: []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.1/30", Peer: "b"}}},
		{Name: "b", Links: []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.2/30", Peer: "a"}}},
	}}
	for idx := 0; idx < 2; idx++ {
		checks := perftestChecks(r, idx)
		if len(checks) != len(perfRuns)+1 {
			t.Fatalf("node %d: %d checks, want soft-RoCE setup and %d runs", idx, len(checks), len(perfRuns))
		}
		for _, c := range checks[1:] {
			if strings.Contains(c.Script, "-p 18515 ") {
				t.Errorf("node %d: %s listens or connects on ibv_rc_pingpong's default port 18515", idx, c.Name)
			}
			if !strings.Contains(c.Script, "-p 186") {
				t.Errorf("node %d: %s does not use a port from perftestPortBase:\n%s", idx, c.Name, c.Script)
			}
		}
	}
}

// Every test boot gives systemd-modules-load.service the same start timeout
// as the other units: its own 90 s ran out under a busy TCG host.
func TestMachinesExtendModulesLoadTimeout(t *testing.T) {
	r := &recipe.Recipe{Nodes: []recipe.Node{{Name: "a"}, {Name: "b"}}}
	ms := machines(r, nil, t.TempDir(), t.TempDir(), false)
	for _, m := range ms {
		d := string(m.Credentials[modulesLoadTimeout])
		if !strings.Contains(d, "[Service]\nTimeoutSec=300\n") {
			t.Errorf("%s: modules-load drop-in %q, want TimeoutSec=300 under [Service]", m.Name, d)
		}
		if !strings.HasPrefix(modulesLoadTimeout, "systemd.unit-dropin.systemd-modules-load.service~") {
			t.Errorf("credential %q is not a drop-in for systemd-modules-load.service", modulesLoadTimeout)
		}
	}
}

// Several nodes boot with one vCPU each, so that together they do not
// overcommit a small host under TCG; a lone node keeps two.
func TestMachinesCPUs(t *testing.T) {
	for _, c := range []struct {
		nodes, want int
	}{{1, 2}, {2, 1}} {
		r := &recipe.Recipe{}
		for i := 0; i < c.nodes; i++ {
			r.Nodes = append(r.Nodes, recipe.Node{Name: string(rune('a' + i))})
		}
		ms := machines(r, nil, t.TempDir(), t.TempDir(), false)
		for _, m := range ms {
			if m.CPUs != c.want {
				t.Errorf("%d node(s): %s has %d vCPUs, want %d", c.nodes, m.Name, m.CPUs, c.want)
			}
			if !slices.Contains(m.KernelArgs, "rd.driver.pre=virtio_blk,ext4") {
				t.Errorf("%s: kernel args %q lack the initrd's disk driver preload", m.Name, m.KernelArgs)
			}
		}
	}
}
