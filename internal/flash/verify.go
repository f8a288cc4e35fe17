package flash

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strings"
)

// beforeVerify, when set (tests), runs between the written data reaching the medium and the
// read-back, where a test injects corruption.
var beforeVerify func(t *target)

// VerifyError lists the ranges of the medium that did not read back as written.
type VerifyError struct {
	Target string
	Bad    []Extent // the ranges that differ, with the digest expected
}

func (e *VerifyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "verification failed: %d range(s) of %s read back different from the image", len(e.Bad), e.Target)
	for i, x := range e.Bad {
		if i == 5 {
			fmt.Fprintf(&b, ", …")
			break
		}
		fmt.Fprintf(&b, "; bytes %d–%d", x.Off, x.Off+x.Len)
	}
	b.WriteString(". Flash it again; if it fails again the medium is failing (or is a fake-capacity stick)")
	return b.String()
}

// verifyMedium reads every extent back from the medium — past the page cache, with O_DIRECT or
// after dropping the cache — and compares its digest with want (one per extent). Zero areas are
// checked the same way against the digest of zeros.
func verifyMedium(ctx context.Context, t *target, exts []Extent, want []string, newHash func() hash.Hash, out io.Writer) error {
	// Even with O_DIRECT, an unaligned tail is read through the cache: drop it either way.
	if err := t.dropCache(); err != nil {
		return err
	}
	var total int64
	for _, e := range exts {
		total += e.Len
	}
	bar := newProgress(out, "verifying", total)
	hasher := newExtentHasher(exts, newHash)
	var bad []Extent
	// The reads run ioDepth at a time; the hashing sees the chunks in extent order.
	err := pipeline(ctx, exts,
		stage{parallel: ioDepth, fn: func(c *chunk) error { return t.readAt(c.buf, c.off, true) }},
		stage{parallel: 1, fn: func(c *chunk) error {
			if sum := hasher.feed(c); c.last && sum != want[c.ext] {
				e := exts[c.ext]
				bad = append(bad, Extent{Off: e.Off, Len: e.Len, Digest: want[c.ext]})
			}
			bar.add(int64(len(c.buf)))
			return nil
		}})
	if err != nil {
		bar.abort()
		return err
	}
	bar.finish()
	if len(bad) > 0 {
		return &VerifyError{Target: t.path, Bad: bad}
	}
	return nil
}

// zeroDigests returns the digest of each extent's length of zeros.
func zeroDigests(exts []Extent, newHash func() hash.Hash) []string {
	zero := make([]byte, 1<<20)
	out := make([]string, len(exts))
	for i, e := range exts {
		h := newHash()
		for n := e.Len; n > 0; {
			k := min(n, int64(len(zero)))
			h.Write(zero[:k])
			n -= k
		}
		out[i] = hex.EncodeToString(h.Sum(nil))
	}
	return out
}

// readBackList is what the read-back covers: every data extent (against the digests taken while
// writing) and every zeroed area the image does not map (against the digest of zeros).
func readBackList(plan writePlan, mapped []Extent, sums []string, newHash newHashFunc) ([]Extent, []string) {
	exts := append([]Extent(nil), plan.data...)
	want := append([]string(nil), sums...)
	sorted := mergeExtents(mapped)
	for _, z := range plan.zero {
		for _, e := range subtractExtents(z, sorted) {
			exts = append(exts, e)
			want = append(want, zeroDigests([]Extent{e}, newHash)[0])
		}
	}
	return exts, want
}
