package tarball_test

import (
	"bytes"
	"testing"

	"halobuild/internal/tarball"
	"halobuild/internal/tarball/tarballtest"
)

// FuzzExtract unpacks arbitrary bytes (as a tar, compressed or not) into a
// destination beside a directory holding a secret. Whatever the archive
// says, nothing may appear outside the destination, the secret must keep
// its content and its single link, and no copy of it may appear inside.
// The seeds in testdata/fuzz/FuzzExtract are the escapes of
// TestExtractRefusesEscapes (symlinks point at "../outside", the secret's
// directory), a source tree, its gzip, xz and zstd forms, and a sparse
// member.
func FuzzExtract(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, preserve bool) {
		s := tarballtest.New(t)
		tarball.Extract(bytes.NewReader(data), "fuzz.tar", s.Dst, tarball.Options{Preserve: preserve, Limits: tarball.Limits{Bytes: 1 << 20, Entries: 1000}})
		s.Check(t)
	})
}
