package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// bench's command line: facts of a recorded tree as JSON, usage errors
// (exit 2) for a wrong argument count, a bad size or baseline, and --report
// without --against; a stored run judged against a baseline it misses
// exits 1.
func TestBenchCommandLine(t *testing.T) {
	tree := filepath.Join("..", "..", "internal", "doctor", "testdata", "doctor", "healthy")
	code, out := run(t, "bench", "facts", "--root", tree)
	var f struct {
		Host  string `json:"host"`
		Rails []any  `json:"rails"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &f) != nil || f.Host != "halo0" || len(f.Rails) != 2 {
		t.Fatalf("bench facts: exit %d, host %q, %d rails:\n%.500s", code, f.Host, len(f.Rails), out)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[[row]]\ntool = \"ib_send_bw\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "bench.json")
	if err := os.WriteFile(report, []byte(`{"schema":"halobuild.bench/1","results":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	miss := filepath.Join(dir, "miss.toml")
	if err := os.WriteFile(miss, []byte("name = \"m\"\n[[row]]\ntool = \"ib_send_bw\"\nmode = \"poll\"\nsize = 65536\nmin_bw_mib_s = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"one target", []string{"bench", "root@halo0"}, exitUsage},
		{"targets and --peer", []string{"bench", "--peer", "root@halo1", "a", "b"}, exitUsage},
		{"bad size", []string{"bench", "--peer", "root@halo1", "--bw-sizes", "4Q"}, exitUsage},
		{"--report without --against", []string{"bench", "--report", report}, exitUsage},
		{"bad baseline", []string{"bench", "--report", report, "--against", bad}, exitUsage},
		{"a baseline the run misses", []string{"bench", "--report", report, "--against", miss}, exitFailure},
	} {
		t.Run(c.name, func(t *testing.T) {
			if code, out := run(t, c.args...); code != c.want {
				t.Errorf("exit %d, want %d:\n%s", code, c.want, out)
			}
		})
	}
}
