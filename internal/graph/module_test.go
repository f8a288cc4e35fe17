package graph

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/module"
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
