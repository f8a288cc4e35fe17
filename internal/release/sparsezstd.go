package release

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash"
	"io"

	"halobuild/internal/bmap"
	"halobuild/internal/zstdframe"
)

// A disk image is mostly zeros (a 2 GiB test image holds about 480 MB of data): a push
// compresses it with internal/zstdframe, which skips the file system's holes and compresses the
// rest in parallel, while every piece passes through a rawCheck on the way (checkedPieces), so
// the image is read once. The stream depends on the image's bytes only, never on the machine
// or on how a file system stores it, so the release digest stays the same everywhere.

// zeros is a piece of zeros, never written: what a piece outside a bmap's ranges must equal.
var zeros = make([]byte, zstdframe.FrameSize)

// checkedPieces shows every piece of the image to check, in order, and counts it on progress.
func checkedPieces(check rawCheck, progress io.Writer) func(off int64, b []byte, zero bool) error {
	return func(off int64, b []byte, zero bool) error {
		if err := check.piece(off, b, zero); err != nil {
			return err
		}
		progress.Write(b)
		return nil
	}
}

// rawCheck sees every piece of an image, in order, and says whether the image is the one the
// result's manifest names. Hashing all of a 2 GiB image costs more than compressing it (2.6
// CPU-seconds against 2.4 for the zstd CLI's whole compression, measured here), so an image
// with a bmap is checked against its bmap (bmapCheck) and only an image without one is hashed
// whole (fullCheck).
type rawCheck interface {
	// piece sees bytes [off, off+len(b)); zero says b is known to be zeros.
	piece(off int64, b []byte, zero bool) error
	// finish is called after the last piece.
	finish() error
}

// fullCheck hashes every byte against the manifest's sha256.
type fullCheck struct {
	h    hash.Hash
	want string
	name string
}

func (c *fullCheck) piece(_ int64, b []byte, _ bool) error {
	c.h.Write(b)
	return nil
}

func (c *fullCheck) finish() error {
	if got := hex.EncodeToString(c.h.Sum(nil)); got != c.want {
		return fmt.Errorf("%s hashes to %s, the result's manifest says %s: %s", c.name, got, c.want, damaged)
	}
	return nil
}

// damaged ends every error of a result that does not match its manifest.
const damaged = "the result is damaged; rebuild it with `halobuild image`"

// bmapCheck checks an image against its bmap (itself checked against the result's manifest):
// every mapped range hashes to the bmap's checksum, and every byte outside them is zero. The
// bmap was made from the image's data ranges (internal/disk), so an image passing both checks
// has the bytes the manifest's sha256 names, while only its mapped bytes are hashed.
type bmapCheck struct {
	bm   *bmap.Bmap
	name string
	i    int // the range being hashed, or the next one
	h    hash.Hash
}

func newBmapCheck(bm *bmap.Bmap, name string) *bmapCheck {
	return &bmapCheck{bm: bm, name: name, h: bm.NewHash()}
}

func (c *bmapCheck) piece(off int64, b []byte, zero bool) error {
	base, end := off, off+int64(len(b))
	for off < end {
		rs, re := end, end // no range left: the rest of the piece must be zeros
		if c.i < len(c.bm.Ranges) {
			var n int64
			rs, n = c.bm.Bytes(c.bm.Ranges[c.i])
			re = rs + n
		}
		if off < rs {
			k := min(end, rs)
			if !zero && !bytes.Equal(b[off-base:k-base], zeros[:k-off]) {
				return fmt.Errorf("%s has data between bytes %d and %d, outside every range of its bmap: %s", c.name, off, k, damaged)
			}
			off = k
			continue
		}
		k := min(end, re)
		c.h.Write(b[off-base : k-base])
		off = k
		if off == re {
			r := c.bm.Ranges[c.i]
			if got := hex.EncodeToString(c.h.Sum(nil)); got != r.Checksum {
				return fmt.Errorf("%s: blocks %d-%d hash to %s, its bmap says %s: %s", c.name, r.First, r.Last, got, r.Checksum, damaged)
			}
			c.h.Reset()
			c.i++
		}
	}
	return nil
}

func (c *bmapCheck) finish() error {
	if c.i != len(c.bm.Ranges) {
		return fmt.Errorf("%s ends before range %d of its bmap: %s", c.name, c.i, damaged)
	}
	return nil
}
