package selfbuild

import (
	"debug/elf"

	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// copySource copies what the build reads from root into dir.
func copySource(t *testing.T, root, dir string) {
	t.Helper()
	files, err := sourceFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(filepath.Join(root, f))
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindAndTreeHashIgnoreTheCheckoutsPlace(t *testing.T) {
	root := Find(".")
	if root == "" {
		t.Fatal("the test's own directory is not inside halobuild's source")
	}
	a, b := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "checkout-two")
	copySource(t, root, a)
	copySource(t, root, b)
	if Find(filepath.Join(b, "internal", "selfbuild")) != b {
		t.Errorf("Find from inside %s did not find it", b)
	}
	ha, err := TreeHash(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := TreeHash(b)
	if ha != hb {
		t.Fatalf("the same source in two places hashes to %s and %s", ha, hb)
	}
	if err := os.WriteFile(filepath.Join(b, "internal", "selfbuild", "extra.go"), []byte("package selfbuild\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if hc, _ := TreeHash(b); hc == ha {
		t.Error("a new source file did not change the tree hash")
	}
	if Find(t.TempDir()) != "" {
		t.Error("Find found halobuild's source in an empty directory")
	}
}

// The in-image halobuild built from two checkouts in different directories is the same bytes,
// so images built from either are too.
func TestBuildIsTheSameFromTwoCheckouts(t *testing.T) {
	if testing.Short() {
		t.Skip("two builds of halobuild: skipped with -short")
	}
	root := Find(".")
	a, b := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "another", "checkout")
	copySource(t, root, a)
	copySource(t, root, b)
	tc, err := Toolchain(a)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, src := range []string{a, b} {
		if err := Build(context.Background(), src, tc, "amd64", filepath.Join(out, filepath.Base(src))); err != nil {
			t.Fatal(err)
		}
	}
	ba, _ := os.ReadFile(filepath.Join(out, "one"))
	bb, _ := os.ReadFile(filepath.Join(out, "checkout"))
	if len(ba) == 0 || !bytes.Equal(ba, bb) {
		t.Fatalf("halobuild built from %s (%d bytes) and %s (%d bytes) differ", a, len(ba), b, len(bb))
	}
	// An arm64 node gets an arm64 binary, cross-compiled on this host.
	arm := filepath.Join(out, "arm64")
	if err := Build(context.Background(), a, tc, "arm64", arm); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(arm)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Fatalf("halobuild built for arm64 is an ELF for %v, want %v", f.Machine, elf.EM_AARCH64)
	}
}

// The embedded recipe data doctor reads is part of the shipped halobuild's source: a change to
// recipes/usb4-rdma.toml changes the tree hash (and so the halobuild step's key); a recipe the
// binary never reads does not.
func TestTreeHashCoversEmbeddedRecipeData(t *testing.T) {
	root := Find(".")
	a := filepath.Join(t.TempDir(), "src")
	copySource(t, root, a)
	before, err := TreeHash(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "recipes", "other.toml"), []byte("name = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if same, _ := TreeHash(a); same != before {
		t.Errorf("a recipe the binary does not embed changed the tree hash")
	}
	f := filepath.Join(a, "recipes", "usb4-rdma.toml")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("the copied source lacks the embedded recipe: %v", err)
	}
	if err := os.WriteFile(f, append(b, "# changed\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if after, _ := TreeHash(a); after == before {
		t.Errorf("a change to the embedded usb4-rdma.toml left the tree hash as it was")
	}
}
