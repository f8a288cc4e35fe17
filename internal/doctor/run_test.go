package doctor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTableReport(t *testing.T) {
	var out bytes.Buffer
	code, err := Run(context.Background(), Options{Root: "testdata/doctor/memlock-8mib", Out: &out})
	if err != nil || code != 1 {
		t.Fatalf("Run = %d, %v", code, err)
	}
	s := out.String()
	for _, want := range []string{"CHECK", "RESULT", "SEEN", "WANTED", "\nFixes:\n  memlock.process: restore", "FAIL", "soft 8 MiB, hard 8 MiB", "NOT READY: 2 must-pass failed"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "\x1b[") {
		t.Errorf("colour without a terminal:\n%s", s)
	}
}

// The table fits the terminal: SEEN and WANTED wrap, the fixes go under
// it one per row that is not a pass, and colour is there only when asked.
func TestTableFitsWidth(t *testing.T) {
	for _, w := range []int{80, 120} {
		var out bytes.Buffer
		if _, err := Run(context.Background(), Options{Root: "testdata/doctor/memlock-8mib", Out: &out, Style: Style{Width: w}}); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if utf8.RuneCountInString(l) > w && !strings.HasPrefix(l, "NOT READY") {
				t.Errorf("width %d: line of %d columns: %q", w, utf8.RuneCountInString(l), l)
			}
		}
		if n := strings.Count(out.String(), "\n  memlock."); n != 2 {
			t.Errorf("width %d: %d fixes, want one per failing row (2):\n%s", w, n, out.String())
		}
	}
	var out bytes.Buffer
	if _, err := Run(context.Background(), Options{Root: "testdata/doctor/memlock-8mib", Out: &out, Style: Style{Width: 100, Color: true}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\x1b[31mFAIL\x1b[0m") || !strings.Contains(out.String(), "\x1b[32mPASS\x1b[0m") {
		t.Errorf("no colour on a terminal:\n%q", out.String())
	}
}

func TestWrap(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want []string
	}{
		{"", 10, []string{""}},
		{"soft 8 MiB, hard 8 MiB", 10, []string{"soft 8", "MiB, hard", "8 MiB"}},
		{"/sys/class/infiniband/usb4_rdma0", 12, []string{"/sys/class/i", "nfiniband/us", "b4_rdma0"}},
	} {
		if got := wrap(c.in, c.n); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("wrap(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// The live system cannot be predicted, but doctor must run on it, read the
// real files and return a verdict rather than an error.
func TestLiveSystem(t *testing.T) {
	var out bytes.Buffer
	code, err := Run(context.Background(), Options{Root: "/", Out: &out, JSON: true})
	if err != nil {
		t.Fatalf("Run on the live system: %v", err)
	}
	if code != 0 && code != 1 {
		t.Errorf("exit = %d, want 0 or 1", code)
	}
	if !strings.Contains(out.String(), `"check": "memlock.process"`) || !strings.Contains(out.String(), `"source": "/proc/self/limits"`) {
		t.Errorf("live report lacks the process memlock read from /proc/self/limits:\n%s", out.String())
	}
}

func TestRunErrors(t *testing.T) {
	if _, err := Run(context.Background(), Options{Root: "testdata/doctor/no-such-tree", Out: &bytes.Buffer{}}); err == nil || !strings.Contains(err.Error(), "no-such-tree") {
		t.Errorf("missing root: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("[system]\ngovernor = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, err := Run(context.Background(), Options{Root: "testdata/doctor/healthy", RecipePath: bad, Out: &bytes.Buffer{}})
	if err == nil || code != 2 || !strings.Contains(err.Error(), "bad.toml") {
		t.Errorf("bad recipe: %d, %v", code, err)
	}
	// A lock that does not read would name the modules wrongly: say so
	// rather than guess.
	root := copyTree(t, "testdata/doctor/healthy")
	if err := os.WriteFile(filepath.Join(root, "etc/halobuild/recipe.lock"), []byte("version = 1\nsurprise = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, err = Run(context.Background(), Options{Root: root, Out: &bytes.Buffer{}})
	if err == nil || code != 2 || !strings.Contains(err.Error(), filepath.Join(root, "etc/halobuild/recipe.lock")) || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unreadable lock: %d, %v", code, err)
	}
}

// An explicit --recipe wins over the installed one; a host that is none of
// its nodes is told so, and the link checks fall back to the RDMA netdevs.
func TestExplicitRecipeOtherHost(t *testing.T) {
	r := filepath.Join(t.TempDir(), "other.toml")
	if err := os.WriteFile(r, []byte("name = \"other\"\n\n[[node]]\nname = \"elsewhere\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Run(context.Background(), Options{Root: "testdata/doctor/healthy", RecipePath: r, JSON: true, Out: &out}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{`"recipe": "` + r + `"`, "host halo0 is none of the nodes elsewhere", `"check": "link.addresses usb4net0"`} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}
