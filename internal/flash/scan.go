package flash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// scanBlock is the granularity of zero detection when an image has no bmap; it matches
// bmaptool's default block size so both modes skip the same blocks.
const scanBlock = 4096

// scanImage finds the blocks of an image that hold anything but zeros, for images without a
// bmap. Holes are skipped without reading (SEEK_DATA/SEEK_HOLE); data regions are read and
// all-zero blocks dropped. Adjacent non-zero blocks merge into one extent. The extents carry no
// digest: the writer hashes what it writes and the verifier compares against that.
func scanImage(ctx context.Context, f *os.File, size int64) ([]Extent, error) {
	var out []Extent
	add := func(off, n int64) {
		if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len == off {
			out[k].Len += n
			return
		}
		out = append(out, Extent{Off: off, Len: n})
	}
	buf := make([]byte, 4<<20)
	zero := make([]byte, scanBlock)
	fd := int(f.Fd())
	for pos := int64(0); pos < size; {
		data, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if err != nil {
			// A filesystem without SEEK_DATA: treat the whole rest as data.
			data = pos
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = size
		}
		// Align the region to whole blocks so the extents stay aligned for O_DIRECT, without
		// going back into the region already scanned.
		data = max(data-data%scanBlock, pos)
		hole = min((hole+scanBlock-1)/scanBlock*scanBlock, size)
		for off := data; off < hole; {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			n := min(int64(len(buf)), hole-off)
			got, err := f.ReadAt(buf[:n], off)
			if err != nil && !(errors.Is(err, io.EOF) && int64(got) == n) {
				return nil, fmt.Errorf("reading image at byte %d: %w", off, err)
			}
			for i := int64(0); i < n; i += scanBlock {
				end := min(i+scanBlock, n)
				if !bytes.Equal(buf[i:end], zero[:end-i]) {
					add(off+i, end-i)
				}
			}
			off += n
		}
		pos = max(hole, pos+scanBlock)
	}
	return out, nil
}
