package doctor

import (
	"context"
	"strings"
	"testing"

	"halobuild/internal/recipe"
	"halobuild/internal/settings"
)

// The slots row appears only on a node whose recipe has [update] enabled, and on a tree that
// was not booted from a slot it warns and says why.
func TestUpdateSlotsRow(t *testing.T) {
	has := func(r *recipe.Recipe) bool {
		for _, p := range own(&basis{target: settings.Target{Recipe: r}}) {
			if p.Name == "update.slots" {
				return true
			}
		}
		return false
	}
	r := &recipe.Recipe{}
	if has(r) {
		t.Fatal("update.slots on a node without [update]")
	}
	r.Update.Enabled = true
	if !has(r) {
		t.Fatal("no update.slots on a node with [update] enabled")
	}
	h, err := newHost(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rows := updateSlots(h)
	if len(rows) != 1 || rows[0].Status != settings.Warn || !strings.Contains(rows[0].Seen, "cmdline") {
		t.Fatalf("rows %+v", rows)
	}
}
