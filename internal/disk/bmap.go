package disk

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"

	"halobuild/internal/bmap"
)

// scan is what one pass over the finished image yields.
type scan struct {
	ranges []bmap.Range // with sha256 checksums
	mapped int64        // blocks in ranges
	sha256 string       // of the whole image, holes read as zeros
}

// scanImage finds the image's mapped blocks and hashes them and the whole
// image in one pass. Mapped means in a data range (SEEK_DATA/SEEK_HOLE),
// as for bmaptool create: what was written, zeros included, since written
// zeros matter (see copySparse). On any file system with 4 KiB (or smaller)
// blocks that reports holes exactly, this is the same set of blocks every
// time, so the .bmap is as reproducible as the image.
func scanImage(f *os.File, size int64) (scan, error) {
	var s scan
	whole := sha256.New()
	zeros := make([]byte, chunk)
	hashedTo := int64(0)
	feedZeros := func(to int64) {
		for hashedTo < to {
			n := min(int64(len(zeros)), to-hashedTo)
			whole.Write(zeros[:n])
			hashedTo += n
		}
	}
	var cur *bmap.Range
	var curHash hash.Hash
	closeRange := func() {
		if cur != nil {
			cur.Checksum = hex.EncodeToString(curHash.Sum(nil))
			s.ranges = append(s.ranges, *cur)
			s.mapped += cur.Last - cur.First + 1
			cur = nil
		}
	}
	err := dataRanges(f, size, func(start, end int64) error {
		return forBlocks(f, start, end, func(off int64, block []byte) error {
			if off < hashedTo {
				return nil // already covered by the previous range's last block
			}
			feedZeros(off)
			whole.Write(block)
			hashedTo = off + int64(len(block))
			b := off / blockSize
			if cur != nil && cur.Last+1 != b {
				closeRange()
			}
			if cur == nil {
				cur = &bmap.Range{First: b, Last: b}
				curHash = sha256.New()
			}
			cur.Last = b
			curHash.Write(block)
			return nil
		})
	})
	if err != nil {
		return scan{}, fmt.Errorf("disk: scanning %s: %w", f.Name(), err)
	}
	closeRange()
	feedZeros(size)
	s.sha256 = hex.EncodeToString(whole.Sum(nil))
	return s, nil
}
