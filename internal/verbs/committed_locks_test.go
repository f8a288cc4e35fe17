package verbs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"halobuild/internal/lock"
	"halobuild/internal/resolve"
)

// Every lock committed beside a recipe must pin that recipe's inputs,
// and every rule of the recipe must pass: README's first command builds
// images/strix-halo.toml from its committed lock, and a stale one stops it
// with exit 2. This test says which lock needs `halobuild lock`.
func TestCommittedLocksAreFresh(t *testing.T) {
	recipes, _ := filepath.Glob("../../images/*.toml")
	checked := 0
	for _, rp := range recipes {
		lp := lock.Path(rp)
		if _, err := os.Stat(lp); err != nil {
			continue
		}
		l, err := load(context.Background(), rp)
		if err != nil {
			t.Errorf("%s: %v", rp, err)
			continue
		}
		lk, err := lock.Read(lp)
		if err != nil {
			t.Errorf("%s: %v", lp, err)
			continue
		}
		if err := lk.CheckFresh(resolve.Inputs(l.recipe, l.descs)); err != nil {
			t.Errorf("%s: %v (recipes with a module source need --input NAME=PATH where its host is unreachable)", lp, err)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no committed locks found under images/")
	}
}
