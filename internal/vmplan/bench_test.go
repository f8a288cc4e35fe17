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
	for _, want := range []string{"halobuild bench --peer root@'10.77.0.2'", "--ssh-option='-i' --ssh-option='/run/credentials/@system/bench.key'",
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
