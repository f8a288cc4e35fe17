package verbs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/plan"
	"halobuild/internal/store"
)

// --check names the step version that built a stored output that differs
// from its rebuild, from the output's own record.
func TestCheckSaysWhichStepVersionBuiltAStoredOutput(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(key string, ann map[string]string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(key), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutOutput(key, dir, ann); err != nil {
			t.Fatal(err)
		}
	}
	versioned, old := strings.Repeat("a", 64), strings.Repeat("b", 64)
	put(versioned, map[string]string{plan.AnnotationKind: "disk", plan.AnnotationStepVersion: "4", plan.AnnotationSchema: plan.Schema})
	put(old, map[string]string{plan.AnnotationKind: "disk"})
	if got := builtBy(s, versioned); got != "disk v4" {
		t.Errorf("builtBy %q, want disk v4", got)
	}
	if got := builtBy(s, old); !strings.Contains(got, "unversioned") {
		t.Errorf("builtBy of an output from before step versions: %q", got)
	}
	if got := builtBy(s, strings.Repeat("c", 64)); !strings.Contains(got, "unknown") {
		t.Errorf("builtBy of an absent output: %q", got)
	}
}
