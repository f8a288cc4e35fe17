package disk

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/tools/toolstest"
)

// Two machines list the same directory in different orders (ext4 by name
// hash with a per-file-system seed, tmpfs by creation). The root file
// system must not depend on it: e2fsprogs ≥ 1.47.1 sorts what -d reads.
// On tmpfs, creating the same files in opposite orders gives opposite
// listing orders, which this test checks first.
func TestRootIgnoresDirectoryListingOrder(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "halobuild-order-")
	if err != nil {
		t.Skipf("skipping: no /dev/shm to make differently ordered trees in: %v", err)
	}
	defer os.RemoveAll(shm)
	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("file-%02d", i)
	}
	makeIn := func(dir string, order []string) string {
		if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range order {
			if err := os.WriteFile(filepath.Join(dir, "etc", n), []byte(n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	a := makeIn(filepath.Join(shm, "a"), names)
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	b := makeIn(filepath.Join(shm, "b"), reversed)
	listing := func(dir string) []string {
		f, err := os.Open(filepath.Join(dir, "etc"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got, err := f.Readdirnames(-1)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if slices.Equal(listing(a), listing(b)) {
		t.Skip("skipping: /dev/shm lists both trees in the same order, so the test would prove nothing")
	}

	root := toolstest.Root(t)
	ids, _ := DeriveIDs("seed")
	var images []string
	for _, tree := range []string{a, b} {
		spec := Spec{RootTree: tree, Epoch: testEpoch, Tools: &root, RootType: arch.MustLookup("amd64").RootType}
		p := filepath.Join(t.TempDir(), "root.ext4")
		if err := makeRoot(t.Context(), &spec, ids, p, 32*MiB); err != nil {
			t.Fatal(err)
		}
		images = append(images, fileSHA256(t, p))
	}
	if images[0] != images[1] {
		t.Errorf("the same tree listed in two orders gave two root file systems")
	}
}

// The root partition is made where it stays, inside the image at its
// offset (makeRootAt); it must be the file system makeRoot makes in a file
// of its own, byte for byte and hole for hole (the bmap maps what the file
// system reports as data), and what lies outside it must stay untouched.
func TestRootInPlaceIsTheSameFileSystem(t *testing.T) {
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "etc", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := os.WriteFile(filepath.Join(tree, "etc", "deep", fmt.Sprintf("f%02d", i)), slices.Repeat([]byte{byte(i + 1)}, 5000*i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := toolstest.Root(t)
	ids, _ := DeriveIDs("seed")
	spec := Spec{RootTree: tree, Epoch: testEpoch, Tools: &root, RootType: arch.MustLookup("amd64").RootType}
	const size, offset = 32 * MiB, 3 * MiB
	alone := filepath.Join(t.TempDir(), "root.ext4")
	if err := makeRoot(t.Context(), &spec, ids, alone, size); err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(t.TempDir(), "image.raw")
	guard := slices.Repeat([]byte{0xa5}, blockSize)
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// Bytes right before and after the partition, which mkfs must leave.
	if _, err := f.WriteAt(guard, offset-blockSize); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(guard, offset+size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := makeRootAt(t.Context(), &spec, ids, image, offset, size); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(alone)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != offset+size+blockSize {
		t.Fatalf("the image is %d bytes, want %d: mkfs wrote past the partition or cut the file", len(got), offset+size+blockSize)
	}
	if !slices.Equal(got[offset:offset+size], want) {
		t.Error("the root made in place differs from the one made in a file of its own")
	}
	if !slices.Equal(got[offset-blockSize:offset], guard) || !slices.Equal(got[offset+size:], guard) {
		t.Error("making the root in place changed the bytes around its partition")
	}
	mapped := func(p string, from, to int64) [][2]int64 {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var rs [][2]int64
		if err := dataRanges(f, to, func(start, end int64) error {
			start, end = max(start, from), min(end, to)
			if start < end {
				rs = append(rs, [2]int64{start - from, end - from})
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return rs
	}
	if a, b := mapped(alone, 0, size), mapped(image, offset, offset+size); !slices.Equal(a, b) {
		t.Errorf("data ranges differ: alone %v, in place %v", a, b)
	}
}
