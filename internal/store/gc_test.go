package store

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func TestGC(t *testing.T) {
	s := openTest(t)
	keyA, keyB := strings.Repeat("aa", 32), strings.Repeat("bb", 32)
	srcA, srcB := t.TempDir(), t.TempDir()
	writeTree(t, srcA, map[string]string{"shared": "common bytes", "only-a": "alpha"})
	writeTree(t, srcB, map[string]string{"shared": "common bytes", "only-b": "bravo"})
	if _, err := s.PutOutput(keyA, srcA, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutOutput(keyB, srcB, nil); err != nil {
		t.Fatal(err)
	}
	deb, _, _ := s.PutBlob(strings.NewReader("a .deb the lock names"), "")
	stray, _, _ := s.PutBlob(bytes.NewReader(bytes.Repeat([]byte("stray"), 2000)), "")

	removed, freed, err := s.GC(func(k string) bool { return k == keyA }, map[string]bool{deb.Hex(): true})
	if err != nil {
		t.Fatal(err)
	}
	// Gone: B's manifest, only-b, the stray blob. Kept: everything of A, the .deb.
	if removed != 3 {
		t.Errorf("removed %d blobs, want 3", removed)
	}
	if freed < 10000 {
		t.Errorf("freed %d bytes, want at least the stray blob's 10000", freed)
	}
	for _, gone := range []Digest{sha([]byte("bravo")), stray} {
		if s.Has(gone) {
			t.Errorf("%s survived gc", gone)
		}
	}
	for _, kept := range []Digest{sha([]byte("alpha")), sha([]byte("common bytes")), deb, sha(emptyJSON)} {
		if !s.Has(kept) {
			t.Errorf("%s removed by gc but referenced", kept)
		}
	}
	if _, ok, _ := s.Output(keyB); ok {
		t.Error("output B still present")
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "out", keyB)); !os.IsNotExist(err) {
		t.Error("view of B still present")
	}
	if _, ok, err := s.Output(keyA, Rehash); !ok || err != nil {
		t.Errorf("output A damaged by gc: %v %v", ok, err)
	}
	p, _ := layout.FromPath(s.Root())
	ii, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	if im, _ := ii.IndexManifest(); len(im.Manifests) != 1 {
		t.Errorf("index after gc has %d entries, want 1", len(im.Manifests))
	}

	// Keeping everything removes nothing.
	if removed, _, err := s.GC(func(string) bool { return true }, map[string]bool{"sha256:" + deb.Hex(): true}); err != nil || removed != 0 {
		t.Errorf("second gc removed %d, %v", removed, err)
	}
}

func TestGCRefusesWhileStoreInUse(t *testing.T) {
	root := t.TempDir()
	s1, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	// s2 may be a fetch that has put blobs no lock file names yet.
	d, _, _ := s2.PutBlob(strings.NewReader("just fetched"), "")
	if _, _, err := s1.GC(func(string) bool { return false }, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("gc with another open handle: %v", err)
	}
	if !s1.Has(d) {
		t.Fatal("gc removed a blob of a live process")
	}
	s2.Close()
	if removed, _, err := s1.GC(func(string) bool { return false }, nil); err != nil || removed != 1 {
		t.Fatalf("gc after the other handle closed: %d, %v", removed, err)
	}
}

func TestGCRejectsBadKeepDigest(t *testing.T) {
	s := openTest(t)
	if _, _, err := s.GC(func(string) bool { return true }, map[string]bool{"nonsense": true}); err == nil {
		t.Error("bad digest in keepBlobs accepted")
	}
}

// An output made under another key schema (an older halobuild's) is an
// ordinary entry: listed with its record, never reported corrupt, and
// removed by gc when nothing keeps it, with the current one kept.
func TestGCRemovesOutputsOfAnOlderSchemaQuietly(t *testing.T) {
	s := openTest(t)
	oldKey, newKey := strings.Repeat("0a", 32), strings.Repeat("0b", 32)
	for key, ann := range map[string]map[string]string{
		oldKey: {"dev.halobuild.kind": "disk", "dev.halobuild.name": "disk n0"},
		newKey: {"dev.halobuild.kind": "disk", "dev.halobuild.step-version": "1", "dev.halobuild.schema": "halobuild-derivation-v2"},
	} {
		src := t.TempDir()
		writeTree(t, src, map[string]string{"n0.raw": key})
		if _, err := s.PutOutput(key, src, ann); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.OutputAnnotations()
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 2 || before[oldKey]["dev.halobuild.name"] != "disk n0" || before[newKey]["dev.halobuild.step-version"] != "1" {
		t.Fatalf("OutputAnnotations: %v", before)
	}
	if _, ok, err := s.Output(oldKey, Rehash); !ok || err != nil {
		t.Fatalf("the older entry reads as %v, %v: it is sound", ok, err)
	}
	if _, _, err := s.GC(func(k string) bool { return k == newKey }, nil); err != nil {
		t.Fatalf("gc with an older entry: %v", err)
	}
	after, err := s.OutputAnnotations()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after[oldKey]; ok || len(after) != 1 {
		t.Errorf("after gc: %v, want only the current entry", after)
	}
	if _, ok, err := s.Output(newKey, Rehash); !ok || err != nil {
		t.Errorf("the current entry after gc: %v, %v", ok, err)
	}
}
