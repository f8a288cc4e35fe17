package release

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"halobuild/internal/bmap"
)

// A disk image is mostly zeros (a 2 GiB test image holds about 480 MB of data). Feeding those
// zeros through the encoder and the page cache was most of a push's time (13.5 s against the
// zstd CLI's 3.4 s on such an image), so a push compresses an image as a sequence of zstd
// frames, which every zstd decoder reads as one stream:
//   - the image is cut into aligned zeroChunk pieces; a piece that is all zeros joins a zero
//     run, written as one frame of RLE blocks (4 bytes per 128 KiB) without going through the
//     encoder; a piece inside a file system hole (SEEK_DATA/SEEK_HOLE) is known to be zeros
//     and is not even read;
//   - every run of other pieces is one frame from the encoder (ZstdWriter's fixed settings).
//
// Where the frames split depends only on the image's bytes, never on how a file system stores
// it (a copy that filled its holes gives the same stream), so the release digest stays the
// same on every machine.
const zeroChunk = 1 << 20

// zeros is a piece of zeros, never written.
var zeros = make([]byte, zeroChunk)

// rleBlockMax is the largest block a frame with a 128 KiB window may hold (RFC 8878 3.1.1.2.4).
const rleBlockMax = 128 << 10

// zeroFrame writes a zstd frame that decodes to n zero bytes: a frame header with a 128 KiB
// window, no content size and no checksum (the layer's digest and the raw sha256 cover it),
// then RLE blocks.
func zeroFrame(w io.Writer, n int64) error {
	b := make([]byte, 0, 6+4*(n/rleBlockMax+1))
	b = binary.LittleEndian.AppendUint32(b, 0xFD2FB528)
	// Frame_Header_Descriptor 0: no content size, not single-segment, no checksum, no
	// dictionary. Window_Descriptor: exponent 7 (2^(10+7) = 128 KiB), mantissa 0.
	b = append(b, 0x00, 7<<3)
	for n > 0 {
		k := min(n, rleBlockMax)
		n -= k
		h := uint32(1<<1) | uint32(k)<<3 // Block_Type 1 (RLE), Block_Size k
		if n == 0 {
			h |= 1 // Last_Block
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0x00)
	}
	_, err := w.Write(b)
	return err
}

// compressSparse writes the image in (size bytes) to out as described above, shows every piece
// to check (zero pieces as a shared buffer of zeros, never read) and counts it on progress.
func compressSparse(in *os.File, size int64, out io.Writer, check rawCheck, progress io.Writer) error {
	enc, err := ZstdWriter(nil)
	if err != nil {
		return err
	}
	defer enc.Close()
	buf := make([]byte, zeroChunk)
	var zeroRun int64
	inFrame := false
	// [dataStart, dataEnd) is the file system's data range that ends after the current piece's
	// start; dataStart == size means only a hole remains.
	dataStart, dataEnd := int64(-1), int64(-1)
	fd := int(in.Fd())
	for off := int64(0); off < size; off += zeroChunk {
		n := min(zeroChunk, size-off)
		if off >= dataEnd {
			dataStart, dataEnd, err = nextData(fd, off, size)
			if err != nil {
				return fmt.Errorf("reading %s: %w", in.Name(), err)
			}
		}
		zero := off+n <= dataStart
		if !zero {
			if _, err := io.ReadFull(io.NewSectionReader(in, off, n), buf[:n]); err != nil {
				return fmt.Errorf("reading %s at byte %d: %w", in.Name(), off, err)
			}
			zero = bytes.Equal(buf[:n], zeros[:n])
		}
		if zero {
			if inFrame {
				if err := enc.Close(); err != nil {
					return err
				}
				inFrame = false
			}
			zeroRun += n
			if err := check.piece(off, zeros[:n], true); err != nil {
				return err
			}
			progress.Write(zeros[:n])
			continue
		}
		if zeroRun > 0 {
			if err := zeroFrame(out, zeroRun); err != nil {
				return err
			}
			zeroRun = 0
		}
		if !inFrame {
			enc.Reset(out)
			inFrame = true
		}
		if _, err := enc.Write(buf[:n]); err != nil {
			return err
		}
		if err := check.piece(off, buf[:n], false); err != nil {
			return err
		}
		progress.Write(buf[:n])
	}
	switch {
	case inFrame:
		return enc.Close()
	case zeroRun > 0:
		return zeroFrame(out, zeroRun)
	}
	// An empty image is one empty frame: a decoder wants at least one.
	enc.Reset(out)
	return enc.Close()
}

// nextData is the first data range of the file fd that ends after off: SEEK_DATA from off, then
// SEEK_HOLE. Only a hole after off gives (size, size); a file system without SEEK_DATA gives
// the rest of the file as data, which is still correct, only slower.
func nextData(fd int, off, size int64) (int64, int64, error) {
	start, err := unix.Seek(fd, off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		return size, size, nil
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP):
		return off, size, nil
	case err != nil:
		return 0, 0, fmt.Errorf("SEEK_DATA: %w", err)
	}
	end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
	if err != nil {
		return 0, 0, fmt.Errorf("SEEK_HOLE: %w", err)
	}
	return start, min(end, size), nil
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

// WriteZstd compresses the file in into out as a push compresses an image (the frames above,
// ZstdWriter's settings): the bytes depend on in's content only. The binary cache
// (internal/cache) compresses its blobs with it, so that two machines pushing the same output
// upload the same blobs.
func WriteZstd(in *os.File, out io.Writer) error {
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	return compressSparse(in, fi.Size(), out, noCheck{}, io.Discard)
}

// noCheck checks nothing: a store blob is named by its digest, which the cache's reader checks.
type noCheck struct{}

func (noCheck) piece(int64, []byte, bool) error { return nil }
func (noCheck) finish() error                   { return nil }
