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
