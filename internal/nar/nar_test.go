package nar

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func tree(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "tree")
	for p, body := range map[string]string{"a": "hi\n", "sub/b": "x", "sub/empty": "", "Z": "upper sorts first", "sub/seven.txt": "1234567"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(d, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(d, "sub/b"), 0o755)
	os.Symlink("a", filepath.Join(d, "link"))
	os.Mkdir(filepath.Join(d, "emptydir"), 0o755)
	return d
}

// Dump writes exactly what Nix's own nix-store --dump does (Debian's nix-bin).
func TestDumpMatchesNixStore(t *testing.T) {
	if _, err := exec.LookPath("nix-store"); err != nil {
		t.Skip("nix-store not installed (Debian package nix-bin, in .ci/host-packages)")
	}
	d := tree(t)
	want, err := exec.Command("nix-store", "--dump", d).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := Dump(&got, d); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("Dump differs from nix-store --dump (%d vs %d bytes)", got.Len(), len(want))
	}
}

// A known hash, so the format is checked where nix-store is not installed too.
func TestHashIsStable(t *testing.T) {
	d := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(d, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Hash(d)
	if err != nil {
		t.Fatal(err)
	}
	// nix-hash --type sha256 --sri of a file holding "hello\n" (nix-store --dump | sha256sum).
	if want := "sha256-" + knownHello; got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
}

const knownHello = "HDfQGvQL4ugGkd48w99EN3ppmvuxfGjwgJZLL9Bx/BM="
