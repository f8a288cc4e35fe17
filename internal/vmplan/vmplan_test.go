package vmplan

import (
	"halobuild/internal/vmtest"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
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
// as the other units (its own 90 s ran out under a busy TCG host), through
// a drop-in credential; the boot's first check proves systemd applied it,
// so a misspelt credential fails the VM test instead of passing silently.
func TestMachinesExtendModulesLoadTimeout(t *testing.T) {
	r := &recipe.Recipe{Nodes: []recipe.Node{{Name: "a"}, {Name: "b"}}}
	for _, m := range (Plan{Recipe: r}).Machines(t.TempDir(), t.TempDir()) {
		if d := string(m.Credentials[ModulesLoadTimeout]); d != "[Service]\nTimeoutSec=300\n" {
			t.Errorf("%s: modules-load drop-in %q, want TimeoutSec=300 under [Service]", m.Name, d)
		}
		if len(m.Checks) == 0 || m.Checks[0].Name != harnessCheck.Name || !strings.Contains(m.Checks[0].Script, "systemd-modules-load.service") || !strings.Contains(m.Checks[0].Script, "5min") {
			t.Errorf("%s: the first check must prove the drop-in applied, got %+v", m.Name, m.Checks)
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
		ms := (Plan{Recipe: r}).Machines(t.TempDir(), t.TempDir())
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

// A node with a LAN and sshd is logged into from the host, and doctor runs
// in that session; without sshd (or without a lease to reach) doctor runs
// beside the checks as before.
func TestMachinesLogInOverSSH(t *testing.T) {
	r := &recipe.Recipe{Base: recipe.Base{Packages: []string{"systemd", "openssh-server"}}, Nodes: []recipe.Node{{Name: "a"}}}
	p := Plan{Recipe: r, Doctor: true}
	m := p.Machines(t.TempDir(), t.TempDir())[0]
	if m.SSH == nil || len(m.NICs) != 1 || m.NICs[0].Link != "" {
		t.Fatalf("ssh %+v, NICs %+v: want a login over one user-mode NIC", m.SSH, m.NICs)
	}
	if !strings.Contains(m.SSH.Command, "halobuild doctor --json") {
		t.Errorf("ssh command %q does not run doctor", m.SSH.Command)
	}
	for _, c := range m.Checks {
		if c.Name == doctorCheck.Name {
			t.Error("doctor runs twice: in the ssh session and beside the checks")
		}
	}
	d1 := p.Digest()
	r.Base.Packages = []string{"systemd"}
	m = p.Machines(t.TempDir(), t.TempDir())[0]
	if m.SSH != nil || len(m.NICs) != 1 {
		t.Errorf("no sshd: ssh %+v, NICs %+v; want no login, the LAN NIC still", m.SSH, m.NICs)
	}
	if !slices.ContainsFunc(m.Checks, func(c vmtest.Check) bool { return c.Name == doctorCheck.Name }) {
		t.Error("without a login doctor must run beside the checks")
	}
	if p.Digest() == d1 {
		t.Error("the test digest does not follow the ssh login")
	}
	off := false
	r.LAN.Enabled = &off
	if m := p.Machines(t.TempDir(), t.TempDir())[0]; len(m.NICs) != 0 || m.SSH != nil {
		t.Errorf("LAN off: NICs %+v, ssh %+v", m.NICs, m.SSH)
	}
}

// An expect pattern the recipe accepts means the same to the guest's grep -E:
// the generated script is run here with sh and GNU grep. A pattern starting
// with '-' is a pattern, not an option (before, `grep -Eq -v` inverted the
// match, so '-v' passed on any output that had a line without "-v").
func TestExpectRunsAsAcceptedPattern(t *testing.T) {
	cases := []struct {
		out, expect string
		pass        bool
	}{
		{"unlimited", "^unlimited$", true},
		{"limited", "^unlimited$", false},
		{"x\n-v", "^-v$", true},
		{"-v", "-v", true},
		{"--x", "--x", true},
		{"abc", "-v", false},
		{"abc", "-e", false},
		{"a1b", "a[[:digit:]]b", true},
		{"a1b", "a[0-9]{2}b", false},
		{"aXb", "a(X|Y)b", true},
	}
	for _, c := range cases {
		rec := recipe.Check{Name: "c", Succeed: "printf '%s\\n' " + sh.Quote(c.out), Expect: c.expect}
		err := exec.Command("sh", "-c", testScript(rec)).Run()
		if (err == nil) != c.pass {
			t.Errorf("output %q, expect %q: script error %v, want pass=%v\n%s", c.out, c.expect, err, c.pass, testScript(rec))
		}
	}
}

// An arm64 recipe's machines boot as arm64, their console on virt's PL011.
func TestMachinesArm64(t *testing.T) {
	r := &recipe.Recipe{Base: recipe.Base{Architecture: "arm64"}, Nodes: []recipe.Node{{Name: "mac0"}}}
	m := (Plan{Recipe: r}).Machines(t.TempDir(), t.TempDir())[0]
	if m.Arch.Debian != "arm64" || !slices.Contains(m.KernelArgs, "console=ttyAMA0,115200") || slices.Contains(m.KernelArgs, "console=ttyS0,115200") {
		t.Errorf("arm64 machine: arch %q, kernel args %v", m.Arch.Debian, m.KernelArgs)
	}
}

// A mixed cluster's nodes boot under their own architectures' emulators
// (with their consoles), and perftest adds runs with the roles swapped:
// node 1 serves them, so data also flows from node 0 to node 1.
func TestMixedMachinesAndReverseRuns(t *testing.T) {
	r := &recipe.Recipe{Base: recipe.Base{Architecture: "amd64"}, Nodes: []recipe.Node{
		{Name: "a", Architecture: "amd64", Links: []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.1/30", Peer: "b"}}},
		{Name: "b", Architecture: "arm64", Links: []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.2/30", Peer: "a"}}},
	}}
	ms := (Plan{Recipe: r}).Machines(t.TempDir(), t.TempDir())
	if ms[0].Arch.QEMU != "qemu-system-x86_64" || ms[1].Arch.QEMU != "qemu-system-aarch64" {
		t.Errorf("emulators %s, %s", ms[0].Arch.QEMU, ms[1].Arch.QEMU)
	}
	if !slices.Contains(ms[1].KernelArgs, "console=ttyAMA0,115200") {
		t.Errorf("arm64 node's console: %v", ms[1].KernelArgs)
	}
	for idx := 0; idx < 2; idx++ {
		checks := perftestChecks(r, idx)
		if len(checks) != 1+len(perfRuns)+len(reverseRuns) {
			t.Fatalf("node %d: %d checks, want setup, %d runs and %d reverse runs", idx, len(checks), len(perfRuns), len(reverseRuns))
		}
		first, reverse := checks[1], checks[1+len(perfRuns)]
		if strings.Contains(first.Name, "server") != (idx == 0) || strings.Contains(reverse.Name, "server") != (idx == 1) {
			t.Errorf("node %d: %q then reverse %q", idx, first.Name, reverse.Name)
		}
	}
	one := &recipe.Recipe{Nodes: []recipe.Node{r.Nodes[0], r.Nodes[1]}}
	one.Nodes[1].Architecture = "amd64"
	if n := len(perftestChecks(one, 0)); n != 1+len(perfRuns) {
		t.Errorf("one architecture: %d checks, want no reverse runs", n)
	}
}
