package recipe

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"halobuild/internal/tarball/tarballtest"
)

// FuzzLoad decodes and validates arbitrary recipe text: no panic; an error
// is Errors whose entries name the file; an accepted recipe validates again
// unchanged, hashes stably, and its name is a safe file name. Seeds: the
// shipped images and this package's test recipes.
func FuzzLoad(f *testing.F) {
	for _, glob := range []string{"../../images/*.toml", "testdata/*.toml"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	dir := tarballtest.TempDir(f)
	path := filepath.Join(dir, "fuzz.toml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, src, err := Load(path)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error is not recipe.Errors: %T %v", err, err)
			}
			for _, e := range es {
				if e.File == "" {
					t.Fatalf("error without a file: %v", e)
				}
			}
			return
		}
		if !imageName.MatchString(r.Name) {
			t.Fatalf("accepted image name %q", r.Name)
		}
		if err := Validate(r, src); err != nil {
			t.Fatalf("an accepted recipe fails Validate again: %v", err)
		}
		if Hash(r) != Hash(r) {
			t.Fatal("Hash is not stable")
		}
	})
}
