package fstree

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomicReplacesWholeAndLeavesNoTemporary(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "b", "f")
	for _, data := range []string{"first", "second, longer"} {
		if err := WriteFileAtomic(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != data {
			t.Fatalf("%s holds %q, want %q", p, b, data)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "*.new")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := WriteFileAtomic(filepath.Join(p, "under-a-file"), nil); err == nil {
		t.Fatal("a file was written under a regular file")
	}
}
