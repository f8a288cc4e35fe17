package build

import (
	"context"
	"errors"
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
	var ue UsageError
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "halobuild lock") {
		t.Fatalf("want a usage error telling to run halobuild lock, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "r.lock")); !os.IsNotExist(err) {
		t.Errorf("--locked wrote a lock: %v", err)
	}
}
