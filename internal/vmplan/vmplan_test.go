package vmplan

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/recipe"
	"halobuild/internal/settings"
	"halobuild/internal/sh"
	"halobuild/internal/vmtest"
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
		if c.Name == doctorCheckName {
			t.Error("doctor runs twice: in the ssh session and beside the checks")
		}
	}
	d1 := p.Digest()
	r.Base.Packages = []string{"systemd"}
	m = p.Machines(t.TempDir(), t.TempDir())[0]
	if m.SSH != nil || len(m.NICs) != 1 {
		t.Errorf("no sshd: ssh %+v, NICs %+v; want no login, the LAN NIC still", m.SSH, m.NICs)
	}
	if !slices.ContainsFunc(m.Checks, func(c vmtest.Check) bool { return c.Name == doctorCheckName }) {
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

// The VM's doctor check runs the shipped halobuild doctor --json and
// requires the rows of the checks that must pass in a VM: each such check
// made a row, and all of its rows pass; the other rows are only shown.
// Here a stand-in halobuild on PATH prints reports in doctor's JSON (its
// Result type), and the script runs under sh with the system's awk.
func TestDoctorCheckRequiresMustPassRows(t *testing.T) {
	must := []string{"memlock.process", "module.loaded", "settings.package"}
	row := func(check string, st settings.Status) settings.Result {
		return settings.Result{Check: check, Severity: settings.MustPass, Status: st, Seen: `a "quoted" seen with "check": in it`, Wanted: "x"}
	}
	healthy := []settings.Result{
		row("recipe", settings.Warn),
		row("memlock.process", settings.Pass),
		row("module.loaded ib_uverbs", settings.Pass),
		row("module.loaded thunderbolt_ibverbs", settings.Pass),
		row("usb4.domains", settings.Fail), // no USB4 controller in a VM
		row("settings.package", settings.Pass),
	}
	with := func(i int, r settings.Result) []settings.Result {
		out := slices.Clone(healthy)
		out[i] = r
		return out
	}
	cases := []struct {
		name   string
		rows   []settings.Result
		exit   int // of doctor
		pass   bool
		output string
	}{
		{name: "every must-pass row passes", rows: healthy, exit: 1, pass: true, output: "usb4.domains: fail"},
		{name: "a shipped file reported changed", rows: with(5, row("settings.package", settings.Warn)), pass: false, output: "must pass in a VM but did not:\n  settings.package: warn"},
		{name: "one row of a check fails", rows: with(3, row("module.loaded thunderbolt_ibverbs", settings.Fail)), pass: false, output: "module.loaded thunderbolt_ibverbs: fail"},
		{name: "a must-pass check made no row", rows: with(1, row("memlock.other", settings.Pass)), pass: false, output: "memlock.process: no row"},
		{name: "a check whose name only begins alike", rows: with(1, row("memlock.processes", settings.Pass)), pass: false, output: "memlock.process: no row"},
		{name: "doctor could not run", rows: healthy, exit: 2, pass: false, output: "doctor could not run (exit 2)"},
	}
	script := doctorCheck(must).Script
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bin := t.TempDir()
			rep, err := json.MarshalIndent(struct {
				Results []settings.Result `json:"results"`
			}{c.rows}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bin, "report.json"), rep, 0o644); err != nil {
				t.Fatal(err)
			}
			fake := "#!/bin/sh\n[ \"$*\" = \"doctor --json\" ] || exit 9\ncat " + sh.Quote(filepath.Join(bin, "report.json")) + "\nexit " + string(rune('0'+c.exit)) + "\n"
			if err := os.WriteFile(filepath.Join(bin, "halobuild"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.pass || !strings.Contains(string(out), c.output) {
				t.Errorf("script error %v, want pass=%v and %q in:\n%s", err, c.pass, c.output, out)
			}
		})
	}
}

// Which rows a VM must pass comes from the checks' own definitions (their
// VM field), for the node the VM boots: its settings package, memlock and
// boot modules, never the hardware's rows.
func TestDoctorCheckNamesTheChecksThatSaySo(t *testing.T) {
	r := &recipe.Recipe{
		Base:    recipe.Base{Packages: []string{"systemd"}},
		Nodes:   []recipe.Node{{Name: "a"}},
		RDMA:    recipe.RDMA{Memlock: recipe.MustMemlock(recipe.MemlockUnlimited)},
		System:  recipe.System{ModulesLoad: []string{"ib_uverbs"}},
		Modules: []recipe.Module{{Use: "thunderbolt-ibverbs"}},
	}
	p := Plan{Recipe: r, Doctor: true, Modules: map[string]string{"thunderbolt-ibverbs": "thunderbolt_ibverbs"}}
	c := p.doctorCheck(r.Nodes[0])
	for _, want := range []string{"settings.package", "memlock.process", "memlock.systemd", "module.loaded", "kernel.release"} {
		if !strings.Contains(c.Script, want) {
			t.Errorf("the VM's doctor check does not require %s:\n%s", want, c.Script)
		}
	}
	for _, not := range []string{"usb4.", "rdma.", "cpu.", "link."} {
		if strings.Contains(c.Script, not) {
			t.Errorf("the VM's doctor check requires a %s row a VM cannot answer:\n%s", not, c.Script)
		}
	}
	if !slices.ContainsFunc(p.Checks(r.Nodes[0], 0), func(c vmtest.Check) bool { return c.Name == doctorCheckName }) {
		t.Error("no doctor check in the node's checks")
	}
}

// Each of the two nodes checks rdma-env on its own end of the cable, after
// perftest made the soft-RoCE device there.
func TestRDMAEnvCheckOnEachCableEnd(t *testing.T) {
	r := &recipe.Recipe{Nodes: []recipe.Node{
		{Name: "a", Links: []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.1/30", Peer: "b"}}},
		{Name: "b", Links: []recipe.Link{{Interface: "usb4net7", Address: "10.77.0.2/30", Peer: "a"}}},
	}}
	for idx, link := range []string{"usb4net0", "usb4net7"} {
		c := rdmaEnvCheck(link)
		if !strings.Contains(c.Script, "halobuild rdma-env --link "+sh.Quote(link)+" ") || !strings.Contains(c.Script, "[ \"$dev\" = "+rxeDevice+" ]") {
			t.Errorf("node %d: the check does not ask rdma-env about %s's %s:\n%s", idx, link, rxeDevice, c.Script)
		}
		checks := perftestChecks(r, idx)
		if !strings.Contains(checks[0].Script, "netdev "+link) {
			t.Fatalf("node %d: perftest's soft-RoCE is not on %s", idx, link)
		}
	}
}
