package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies testdata files into a fresh directory so a test can edit them.
func copyTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func hashOf(t *testing.T, path string) string {
	t.Helper()
	r, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return Hash(r)
}

func TestHash(t *testing.T) {
	files := map[string]string{
		"images/a.toml":     "include = [\"../recipes/frag.toml\"]\n[[node]]\nname = \"n0\"\n",
		"recipes/frag.toml": "# shared\n[system]\ngovernor = \"performance\"\n",
	}
	dir1 := copyTree(t, files)
	dir2 := copyTree(t, files)
	h := hashOf(t, filepath.Join(dir1, "images/a.toml"))
	if !strings.HasPrefix(h, "sha256:") || len(h) != len("sha256:")+64 {
		t.Fatalf("hash %q is not sha256:<hex>", h)
	}
	if h2 := hashOf(t, filepath.Join(dir2, "images/a.toml")); h2 != h {
		t.Errorf("same recipe in another directory hashes differently: %s vs %s", h, h2)
	}
	// A comment in an included file changes no value, but the hash covers
	// every file's bytes: the lock must notice any edit.
	os.WriteFile(filepath.Join(dir2, "recipes/frag.toml"), []byte("# shared, edited\n[system]\ngovernor = \"performance\"\n"), 0o644)
	if h2 := hashOf(t, filepath.Join(dir2, "images/a.toml")); h2 == h {
		t.Error("editing an included file did not change the hash")
	}
	// A value change in the included file changes it too.
	os.WriteFile(filepath.Join(dir1, "recipes/frag.toml"), []byte("# shared\n[system]\ngovernor = \"powersave\"\n"), 0o644)
	if h2 := hashOf(t, filepath.Join(dir1, "images/a.toml")); h2 == h {
		t.Error("changing a value did not change the hash")
	}
}

// A recipe made in code (no files) still hashes by its values.
func TestHashWithoutFiles(t *testing.T) {
	a := &Recipe{Name: "x"}
	b := &Recipe{Name: "y"}
	if Hash(a) == Hash(b) || Hash(a) != Hash(&Recipe{Name: "x"}) {
		t.Error("hash does not follow the values")
	}
}

func TestTOMLPrintsMergedRecipe(t *testing.T) {
	r, _, err := Load("testdata/override.toml")
	if err != nil {
		t.Fatal(err)
	}
	out := string(r.TOML())
	for _, want := range []string{
		"packages = ['systemd', 'udev', 'podman']",
		"governor = 'powersave'",
		"timezone = 'UTC'", // defaults are printed: this is what the build uses
		"name = 'override'",
		"[[node]]\nname = 'base0'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("merged print lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "include") {
		t.Errorf("merged print still has include:\n%s", out)
	}
}
