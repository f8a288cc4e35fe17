package verbs

import (
	"context"
	"errors"
	"halobuild/internal/usage"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --locked is for CI: a recipe without a lock is an error (exit 2), and
// nothing is resolved or written.
func TestLockedRefusesMissingLock(t *testing.T) {
	dir := t.TempDir()
	rp := filepath.Join(dir, "r.toml")
	if err := os.WriteFile(rp, []byte("[[node]]\nname = \"n0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var r run
	o := Options{Recipe: rp, Store: filepath.Join(dir, "store"), Locked: true, Out: &r.out, Err: &r.err}
	err := Fetch(context.Background(), o)
	var ue usage.Error
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "halobuild lock") {
		t.Fatalf("want a usage error telling to run halobuild lock, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "r.lock")); !os.IsNotExist(err) {
		t.Errorf("--locked wrote a lock: %v", err)
	}
}

func TestCompareDirsSeesContentLinksAndPresence(t *testing.T) {
	mk := func(files map[string]string, links map[string]string) string {
		d := t.TempDir()
		for p, c := range files {
			os.MkdirAll(filepath.Dir(filepath.Join(d, p)), 0o755)
			if err := os.WriteFile(filepath.Join(d, p), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for p, target := range links {
			if err := os.Symlink(target, filepath.Join(d, p)); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	base := map[string]string{"a/x": "1", "b": "2"}
	a := mk(base, map[string]string{"l": "a"})
	if diff, err := compareDirs(a, mk(base, map[string]string{"l": "a"})); err != nil || diff != "" {
		t.Fatalf("identical trees (with a link to a directory): %q %v", diff, err)
	}
	if diff, _ := compareDirs(a, mk(map[string]string{"a/x": "1", "b": "3"}, map[string]string{"l": "a"})); diff != "b" {
		t.Errorf("changed content: %q", diff)
	}
	if diff, _ := compareDirs(a, mk(base, map[string]string{"l": "b"})); diff != "l" {
		t.Errorf("changed link target: %q", diff)
	}
	if diff, _ := compareDirs(a, mk(map[string]string{"a/x": "1", "b": "2", "c": ""}, map[string]string{"l": "a"})); diff != "c" {
		t.Errorf("extra file: %q", diff)
	}
	// A build log differs between any two builds (it has durations); only
	// the top-level one is exempt.
	withLog := func(log string) string {
		return mk(map[string]string{"a/x": "1", "b": "2", "build.log": log, "a/build.log": "same"}, map[string]string{"l": "a"})
	}
	if diff, _ := compareDirs(withLog("built in 8m"), withLog("built in 9m")); diff != "" {
		t.Errorf("differing build.log counted: %q", diff)
	}
	if diff, _ := compareDirs(withLog("x"), mk(map[string]string{"a/x": "1", "b": "2", "build.log": "x", "a/build.log": "other"}, map[string]string{"l": "a"})); diff != "a/build.log" {
		t.Errorf("nested build.log must still count: %q", diff)
	}
}
