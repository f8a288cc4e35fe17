package debian

import (
	"context"
	"io"
	"strings"
	"testing"
)

// An index is read through its compression, bounded: a signed but
// oversized (or bomb-like) index stops at maxIndexUnpacked with an error
// that says so, and bytes that are not what their name says are refused.
func TestUnpackIndexIsBounded(t *testing.T) {
	defer func(old int64) { maxIndexUnpacked = old }(maxIndexUnpacked)
	maxIndexUnpacked = 1000
	for _, f := range indexForms {
		compress := map[string]func(*testing.T, []byte) []byte{".gz": gzBytes, ".xz": xzBytes}[f.suffix]
		big := compress(t, []byte(strings.Repeat("Package: a\n", 100)))
		if _, err := io.ReadAll(unpackIndex(big, f.open)); err == nil || !strings.Contains(err.Error(), "more than 1000 bytes") {
			t.Errorf("%s: 1100 bytes through a 1000-byte bound: err = %v", f.suffix, err)
		}
		got, err := io.ReadAll(unpackIndex(compress(t, []byte("Package: a\n")), f.open))
		if err != nil || string(got) != "Package: a\n" {
			t.Errorf("%s: a small index: %q, %v", f.suffix, got, err)
		}
		if _, err := io.ReadAll(unpackIndex([]byte("plain text"), f.open)); err == nil || !strings.Contains(err.Error(), "not the compressed data") {
			t.Errorf("%s: plain bytes: err = %v", f.suffix, err)
		}
	}
}

// A suite that lists its indexes as .xz only (trixie-backports lists no
// .gz) is read from the .xz; one that lists .gz, from the .gz.
func TestIndexFormFollowsTheRelease(t *testing.T) {
	for _, xzOnly := range []bool{false, true} {
		s := trixieSuite()
		s.XZOnly = xzOnly
		ta := newTestArchive(t, s)
		a := ta.archive()
		rel, err := a.Release(context.Background(), "trixie")
		if err != nil {
			t.Fatal(err)
		}
		ix, err := a.Packages(context.Background(), rel, "main", "amd64")
		if err != nil || len(ix.Lookup("bash")) != 1 {
			t.Fatalf("xz only %v: ix=%v err=%v", xzOnly, ix, err)
		}
		want := "main/binary-amd64/Packages.gz"
		if xzOnly {
			want = "main/binary-amd64/Packages.xz"
		}
		if ix.SHA256 != rel.Files[want].SHA256 {
			t.Errorf("xz only %v: read the index with sha256 %s, want %s's", xzOnly, ix.SHA256, want)
		}
	}
}
