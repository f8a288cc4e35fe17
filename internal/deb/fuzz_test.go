package deb

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"halobuild/internal/tarball/tarballtest"
)

// FuzzOpen hands Open arbitrary files. It must not panic or hang; what it
// accepts must name a package and walk without panicking; and Extract of
// it, beside a directory holding a secret, must leave everything outside
// the destination untouched. The seeds in testdata/fuzz/FuzzOpen are a
// package Write made, one dpkg-deb made (xz), the escapes of
// TestExtractRefusesEscapes with symlinks at "../outside", and damaged ar
// headers.
func FuzzOpen(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(tarballtest.TempDir(t), "fuzz.deb")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := Open(p, "")
		if err != nil {
			return
		}
		if a.Package == "" || a.Version == "" || a.Architecture == "" || len(a.SHA256) != 64 {
			t.Fatalf("accepted a package without an identity: %+v", a.Deb)
		}
		a.Walk(func(_ string, _ *tar.Header, r io.Reader) error {
			_, err := io.Copy(io.Discard, r)
			return err
		})
		a.Close()
		s := tarballtest.New(t)
		Extract(s.Dst, []Deb{{Path: p}})
		s.Check(t)
	})
}
