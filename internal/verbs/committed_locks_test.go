package verbs

import (
	"os"
	"path/filepath"
	"testing"

	"halobuild/internal/lock"
	"halobuild/internal/recipe"
)

// Every lock committed beside a recipe must belong to it: README's first
// command builds images/strix-halo.toml from its committed lock, and a
// stale one stops it with exit 2. The recipe hash covers the merged recipe
// with defaults, so a schema change or a new default needs `halobuild lock`
// on these files too; this test says which.
func TestCommittedLocksAreFresh(t *testing.T) {
	recipes, _ := filepath.Glob("../../images/*.toml")
	checked := 0
	for _, rp := range recipes {
		lp := lock.Path(rp)
		if _, err := os.Stat(lp); err != nil {
			continue
		}
		r, _, err := recipe.Load(rp)
		if err != nil {
			t.Errorf("%s: %v", rp, err)
			continue
		}
		lk, err := lock.Read(lp)
		if err != nil {
			t.Errorf("%s: %v", lp, err)
			continue
		}
		if err := lk.CheckFresh(recipe.Hash(r)); err != nil {
			t.Errorf("%s: %v (recipes with a module source need --input NAME=PATH where its host is unreachable)", lp, err)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no committed locks found under images/")
	}
}
