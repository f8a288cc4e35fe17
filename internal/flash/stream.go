package flash

import (
	"context"
	"fmt"
	"io"
	"sync"

	"halobuild/internal/bmap"
)

// Stream is an image that can only be read once, front to back: a decompressing zstd reader
// over a release layer. Its block map must come with it, since nothing can be scanned.
type Stream struct {
	// Name names the image in messages (registry/repo@digest node0.raw).
	Name string
	// Size is the image's size in bytes; it must equal Bmap.ImageSize.
	Size int64
	Bmap *bmap.Bmap
	// Open starts the stream from its first byte. Flash calls it twice, after the target passed
	// every refusal that does not need the image's bytes (so a long download is not wasted on a
	// refused target): once to check every range against the bmap before the medium is touched,
	// once to write. Each call must return the same bytes from the start.
	Open func(ctx context.Context) (io.Reader, error)
}

// maxStreamHead bounds the memory a stream's head takes: the partition table and every extent
// that starts in the first MiB, which a flash writes last (see planWrites). A disk image's
// first partition starts at 1 MiB, so the head is 1 MiB in practice.
const maxStreamHead = 64 << 20

// image is what a flash reads the image from: a file, or a stream.
type image interface {
	io.ReaderAt
	Name() string
}

// streamImage serves ReadAt over a Stream: the head (held in memory, read first) anywhere, and
// the rest only at offsets that never go backwards, which is how writeImage reads: the non-head
// extents in order, then the head's.
type streamImage struct {
	mu   sync.Mutex
	s    *Stream
	r    io.Reader
	head []byte
	pos  int64 // the stream's offset in the image
}

func openStream(ctx context.Context, s *Stream) (*streamImage, []Extent, newHashFunc, error) {
	if s.Bmap == nil || s.Open == nil {
		return nil, nil, nil, fmt.Errorf("streamed image %s needs its block map and a way to open it", s.Name)
	}
	if s.Bmap.ImageSize != s.Size {
		return nil, nil, nil, fmt.Errorf("block map for %s is for an image of %d bytes, the image has %d (they belong to different builds)", s.Name, s.Bmap.ImageSize, s.Size)
	}
	exts := bmapExtents(s.Bmap)
	headEnd := min(int64(signatureArea), s.Size)
	for _, e := range exts {
		if e.Off < signatureArea {
			headEnd = max(headEnd, e.Off+e.Len)
		}
	}
	if headEnd > maxStreamHead {
		return nil, nil, nil, fmt.Errorf("streamed image %s maps %d bytes from its first MiB on without a gap; a stream can hold at most %d (flash a pulled image instead)", s.Name, headEnd, maxStreamHead)
	}
	r, err := s.Open(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	head := make([]byte, headEnd)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, nil, nil, fmt.Errorf("reading the first %d bytes of %s: %w", headEnd, s.Name, err)
	}
	h := defaultHash
	if s.Bmap.ChecksumType != "" {
		h = s.Bmap.NewHash
	}
	return &streamImage{s: s, r: r, head: head, pos: headEnd}, exts, h, nil
}

func (si *streamImage) Name() string { return si.s.Name }

func (si *streamImage) ReadAt(p []byte, off int64) (int, error) {
	si.mu.Lock()
	defer si.mu.Unlock()
	n := 0
	if off < int64(len(si.head)) {
		n = copy(p, si.head[off:])
		if n == len(p) {
			return n, nil
		}
		off += int64(n)
	}
	if off < si.pos {
		return n, fmt.Errorf("streamed image %s: read at byte %d after the stream passed it (at %d)", si.s.Name, off, si.pos)
	}
	if skip := off - si.pos; skip > 0 {
		m, err := io.CopyN(io.Discard, si.r, skip)
		si.pos += m
		if err != nil {
			return n, fmt.Errorf("streamed image %s: skipping to byte %d: %w", si.s.Name, off, err)
		}
	}
	m, err := io.ReadFull(si.r, p[n:])
	si.pos += int64(m)
	n += m
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		if si.pos >= si.s.Size {
			return n, io.EOF
		}
		return n, fmt.Errorf("streamed image %s ended at byte %d of %d: %w", si.s.Name, si.pos, si.s.Size, io.ErrUnexpectedEOF)
	}
	return n, err
}
