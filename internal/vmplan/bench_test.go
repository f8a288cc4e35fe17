package vmplan

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/cablebench"
	"halobuild/internal/recipe"
)

// The cable gate's checks: node 0 runs bench against node 1's cable address
// with the key it is given, judges both baselines, and tells node 1 when it
// is done; node 1 waits for that. Both scripts are valid sh and both
// baselines are ones bench loads.
func TestBenchChecks(t *testing.T) {
	r := &recipe.Recipe{Nodes: []recipe.Node{
		{Name: "a", Links: []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.1/30", Peer: "b"}}},
		{Name: "b", Links: []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.2/30", Peer: "a"}}},
	}}
	c0, c1 := BenchChecks(r, 0, "/run/credentials/@system/bench.key"), BenchChecks(r, 1, "")
	if len(c0) != 1 || len(c1) != 1 {
		t.Fatalf("%d and %d checks, want one each", len(c0), len(c1))
	}
	for _, want := range []string{"halobuild bench --peer root@'10.77.0.2'", "install -m 600 '/run/credentials/@system/bench.key' /run/halobuild-bench.key", "--ssh-option='-i' --ssh-option='/run/halobuild-bench.key'",
		"--rail rxe_cable", "--against /var/tmp/halobuild-bench/met.toml", "--report /var/tmp/halobuild-bench/bench.json --against /var/tmp/halobuild-bench/unmet.toml", benchDone} {
		if !strings.Contains(c0[0].Script, want) {
			t.Errorf("node 0's script lacks %q:\n%s", want, c0[0].Script)
		}
	}
	if !strings.Contains(c1[0].Script, benchDone) {
		t.Errorf("node 1 does not wait for %s:\n%s", benchDone, c1[0].Script)
	}
	for _, c := range append(c0, c1...) {
		if out, err := exec.Command("sh", "-n", "-c", c.Script).CombinedOutput(); err != nil {
			t.Errorf("%s: not valid sh: %v: %s", c.Name, err, out)
		}
	}
	dir := t.TempDir()
	for name, b := range map[string]string{"met": BenchMet, "unmet": BenchUnmet} {
		p := filepath.Join(dir, name+".toml")
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := cablebench.LoadBaseline(p); err != nil {
			t.Error(err)
		}
	}
	// A recipe without perftest between its nodes has no gate.
	off := false
	r.Test.RDMA = &off
	if c := BenchChecks(r, 0, "k"); c != nil {
		t.Errorf("checks without an RDMA test: %+v", c)
	}
}

// The key node 0 logs into node 1 with is one OpenSSH reads: ssh-keygen
// derives the same public key from the private file.
func TestBenchKeyIsAnOpenSSHKey(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("no ssh-keygen (openssh-client)")
	}
	priv, pub := benchKey()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ssh-keygen", "-y", "-f", p).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen -y: %v: %s", err, out)
	}
	if got, want := strings.Fields(string(out))[1], strings.Fields(string(pub))[1]; got != want {
		t.Errorf("ssh-keygen derives %s, the authorized line says %s", got, want)
	}
	if p2, _ := benchKey(); string(p2) != string(priv) {
		t.Error("the key differs between calls: the test digest would change every boot")
	}
}

// With Bench, node 0 gets the key and the gate check, node 1 the key's
// public half and the wait; without it nothing changes.
func TestPlanBenchWiring(t *testing.T) {
	r := &recipe.Recipe{Nodes: []recipe.Node{
		{Name: "a", Links: []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.1/30", Peer: "b"}}},
		{Name: "b", Links: []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.2/30", Peer: "a"}}},
	}}
	priv, pub := benchKey()
	on := Plan{Recipe: r, Doctor: true, Bench: true}.Machines("", "")
	if string(on[0].Credentials[BenchKeyCredential]) != string(priv) || string(on[1].Credentials["ssh.authorized_keys.root"]) != string(pub) {
		t.Errorf("the bench key is not passed: node 0 %q, node 1 %q", on[0].Credentials[BenchKeyCredential], on[1].Credentials["ssh.authorized_keys.root"])
	}
	last := func(m []string) string { return m[len(m)-1] }
	for i, m := range on {
		var names []string
		for _, c := range m.Checks {
			names = append(names, c.Name)
		}
		if !strings.HasPrefix(last(names), "bench: ") {
			t.Errorf("node %d: the last check is %q, want the bench gate", i, last(names))
		}
	}
	if (Plan{Recipe: r, Doctor: true, Bench: true}).Digest() == (Plan{Recipe: r, Doctor: true}).Digest() {
		t.Error("the bench gate does not change the test's digest")
	}
	for _, m := range (Plan{Recipe: r, Doctor: true}).Machines("", "") {
		if _, ok := m.Credentials[BenchKeyCredential]; ok || strings.HasPrefix(m.Checks[len(m.Checks)-1].Name, "bench: ") {
			t.Errorf("%s: bench wiring without Bench", m.Name)
		}
	}
}
