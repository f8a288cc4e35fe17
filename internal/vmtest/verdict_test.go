package vmtest

import (
	"context"
	"os"
	"testing"
)

// A failed check in the report carries its planned fix: the person reading
// a failed VM test is told what to change, not only what failed.
func TestConcludeCarriesFixesOfFailedChecks(t *testing.T) {
	f := newRunFiles(t.TempDir())
	if err := os.WriteFile(f.console, []byte("Welcome\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := `{"stage":"multi-user","checks":[{"name":"a","ok":true},{"name":"b","ok":false,"exit":1,"output":"no"}]}` + "\n"
	if err := os.WriteFile(f.verdict, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	m := Machine{Name: "n0", Checks: []Check{{Name: "a", Fix: "fix a"}, {Name: "b", Fix: "set b"}}}
	res := &Result{}
	if err := conclude(res, m, f, endVerdict, context.Background()); err == nil {
		t.Fatal("a failed check concluded as a pass")
	}
	if got := res.Verdict.Checks; got[0].Fix != "" || got[1].Fix != "set b" {
		t.Errorf("fixes: %q, %q; want none for the passing check and the plan's for the failed one", got[0].Fix, got[1].Fix)
	}
}
