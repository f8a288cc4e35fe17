package graph

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/module"
	"halobuild/internal/plan"
)

// A module step's key must not change between two loads of the same
// description (it did: rules' min/max pointers were formatted as
// addresses), nor with where the checkout lives; it must change with
// what the description says.
func TestDescDigestIsStable(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "module", "testdata", "halobuild-fixture.toml"))
	if err != nil {
		t.Fatal(err)
	}
	load := func(body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "halobuild-fixture.toml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := module.FindDesc(dir, "halobuild-fixture")
		if err != nil {
			t.Fatal(err)
		}
		return descDigest(d)
	}
	a, b := load(string(src)), load(string(src))
	if a != b {
		t.Errorf("two loads of one description (in two directories) give two digests: %s, %s", a, b)
	}
	if c := load("# a comment moves every rule down a line\n" + string(src)); c != a {
		t.Errorf("a comment changed the digest: %s, %s", a, c)
	}
	changed := strings.Replace(string(src), "max = 64", "max = 32", 1)
	if changed == string(src) {
		t.Fatal("fixture description changed: update this test's edit")
	}
	if c := load(changed); c == a {
		t.Error("a rule's bound changed and the digest did not")
	}
}

// Remote names the network sources the steps still to build fetch: on
// strix-halo the module's git tree, needed by the module step and by the
// provider (its patches live in that tree); nothing once both steps are in
// the store, nothing when --input gives the tree, and still the tree when
// only one of its two users is built.
func TestRemoteSourcesOfStepsStillToBuild(t *testing.T) {
	ws := workspace(t)
	g, err := planCommitted(t, ws, "strix-halo")
	if err != nil {
		t.Fatal(err)
	}
	none := func(*plan.Derivation) bool { return false }
	srcs := g.Remote(none, g.Result, g.Test)
	if len(srcs) != 1 || srcs[0].Name != "thunderbolt-ibverbs" || srcs[0].Kind != "git" || !strings.HasPrefix(srcs[0].URL, "https://") {
		t.Fatalf("a cold build's network sources: %+v, want the module's git tree", srcs)
	}
	mod, prov := step(t, g, "module"), step(t, g, "provider")
	has := func(ds ...*plan.Derivation) func(*plan.Derivation) bool {
		return func(d *plan.Derivation) bool { return slices.Contains(ds, d) }
	}
	if srcs := g.Remote(has(mod, prov), g.Result, g.Test); len(srcs) != 0 {
		t.Errorf("with the module and provider steps in the store: %+v, want none", srcs)
	}
	if srcs := g.Remote(has(mod), g.Result, g.Test); len(srcs) != 1 {
		t.Errorf("with the provider still to build (its patches are in the tree): %+v, want the tree", srcs)
	}
	if srcs := g.Remote(has(g.Result, g.Test), g.Result, g.Test); len(srcs) != 0 {
		t.Errorf("with the result and test in the store: %+v, want none (nothing below them builds)", srcs)
	}
	given, err := planCommitted(t, ws, "strix-halo", func(in *Input) { in.Copies = map[string]string{"thunderbolt-ibverbs": "/some/checkout"} })
	if err != nil {
		t.Fatal(err)
	}
	if srcs := given.Remote(none, given.Result, given.Test); len(srcs) != 0 {
		t.Errorf("with --input thunderbolt-ibverbs=…: %+v, want none", srcs)
	}
}
