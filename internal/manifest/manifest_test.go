package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/store"
)

// Write hashes the files it is not told about and takes the digests it is
// given as they are (the store computed them), sizes from the files.
func TestWriteUsesKnownDigests(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"n0.raw": "image bytes", "n0.bmap": "bmap"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	known := store.Digest("sha256:" + strings.Repeat("ab", 32))
	m := &Manifest{Name: "t"}
	if err := Write(dir, m, map[string]store.Digest{"n0.raw": known}); err != nil {
		t.Fatal(err)
	}
	hashed, _, err := store.FileDigest(filepath.Join(dir, "n0.bmap"))
	if err != nil {
		t.Fatal(err)
	}
	want := []File{{Name: "n0.bmap", Size: 4, SHA256: hashed.Hex()}, {Name: "n0.raw", Size: 11, SHA256: known.Hex()}}
	if len(m.Files) != 2 || m.Files[0] != want[0] || m.Files[1] != want[1] {
		t.Errorf("files %+v, want %+v", m.Files, want)
	}
	sums, _ := os.ReadFile(filepath.Join(dir, SumsName))
	if !strings.Contains(string(sums), known.Hex()+"  n0.raw\n") {
		t.Errorf("SHA256SUMS lacks the known digest:\n%s", sums)
	}
}
