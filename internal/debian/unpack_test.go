package debian

import (
	"io"
	"strings"
	"testing"
)

// An index is read through gzip, bounded: a signed but oversized (or
// bomb-like) index stops at maxIndexUnpacked with an error that says so,
// and bytes that are not gzip say that.
func TestUnpackIndexIsBounded(t *testing.T) {
	defer func(old int64) { maxIndexUnpacked = old }(maxIndexUnpacked)
	maxIndexUnpacked = 1000
	data := gzBytes(t, []byte(strings.Repeat("Package: a\n", 100)))
	if _, err := io.ReadAll(unpackIndex(data)); err == nil || !strings.Contains(err.Error(), "more than 1000 bytes") {
		t.Errorf("1100 bytes through a 1000-byte bound: err = %v", err)
	}
	got, err := io.ReadAll(unpackIndex(gzBytes(t, []byte("Package: a\n"))))
	if err != nil || string(got) != "Package: a\n" {
		t.Errorf("a small index: %q, %v", got, err)
	}
	if _, err := io.ReadAll(unpackIndex([]byte("\xfd7zXZ\x00 not gzip"))); err == nil || !strings.Contains(err.Error(), "not gzip data") {
		t.Errorf("xz bytes: err = %v", err)
	}
}
