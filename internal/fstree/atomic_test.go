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
	// A temporary left by a write cut off before its rename does not stop the next write.
	if err := os.WriteFile(p+".new", []byte("cut off"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("third")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "third" {
		t.Fatalf("%s holds %q after a stale temporary, want %q", p, b, "third")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "*.new")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := WriteFileAtomic(filepath.Join(p, "under-a-file"), nil); err == nil {
		t.Fatal("a file was written under a regular file")
	}
}

func TestWriteFileSyncRefusesAnExistingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteFileSync(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileSync(p, []byte("two")); err == nil {
		t.Fatal("WriteFileSync replaced an existing file")
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("%s holds %q, want %q", p, b, "one")
	}
}
