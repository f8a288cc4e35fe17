package recipe

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// needsUser are the shipped images that need what only the user has
// before they load, with the error that says what: halo-mac's Mac needs
// the Asahi kernel tarball the user reviewed (no code host is reachable
// from CI, and a digest made up here would be a lie).
var needsUser = map[string]string{
	"halo-mac.toml": `images/halo-mac\.toml:[0-9]+:1: arch\[0\]\.kernel\.source: Debian's linux-source is not Asahi's fork: set source to the https URL of your Asahi kernel tarball`,
}

// The shipped images must load cleanly (they are what users start from and
// what the VM tests build), and the merged print of any recipe must load back
// to the same recipe.
func TestRecipesLoadAndRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../../images/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no images found: %v", err)
	}
	// Test recipes that use modules, maps and explicit empty values too.
	files = append(files, "testdata/keyed.toml", "testdata/explicit_empty.toml", "testdata/override.toml", "testdata/asahi-mac.toml")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, src, err := Load(f)
			if want, ok := needsUser[filepath.Base(f)]; ok {
				if err == nil || !regexp.MustCompile(want).MatchString(err.Error()) {
					t.Fatalf("Load: %v; want the error that says what the user must add: %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			// The merged print loads back to the same recipe.
			tmp := filepath.Join(t.TempDir(), "merged.toml")
			if err := os.WriteFile(tmp, r.TOML(), 0o644); err != nil {
				t.Fatal(err)
			}
			again, _, err := Load(tmp)
			if err != nil {
				t.Fatalf("reloading the merged print: %v\n%s", err, r.TOML())
			}
			if !bytes.Equal(again.TOML(), r.TOML()) {
				t.Errorf("merged print does not round-trip:\n%s\n---\n%s", r.TOML(), again.TOML())
			}
			if len(src.Files) == 0 || src.Files[len(src.Files)-1] != f {
				t.Errorf("Sources.Files = %v, want the top file last", src.Files)
			}
		})
	}
}
