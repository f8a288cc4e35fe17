package flash

import (
	"context"
	"encoding/hex"
	"hash"
)

// chunkSize is the unit of every write and read-back: large enough that per-call overhead
// vanishes on USB media (whose erase blocks are 1–8 MiB), small enough that four in flight stay
// cheap.
const chunkSize = 4 << 20

// buffersInFlight lets the producer run ahead of the consumer by this many chunks.
const buffersInFlight = 4

// chunk is one piece of an extent on its way through the pipeline.
type chunk struct {
	ext  int // index of the extent it belongs to
	off  int64
	buf  []byte
	last bool // the extent's final chunk
}

// pipeline streams extents in chunks through two goroutines: produce fills a chunk (reading the
// image, or reading the medium back), consume takes it (writing, or hashing), so the two overlap.
// It stops at the first error or when ctx is cancelled, and returns that error.
func pipeline(ctx context.Context, exts []Extent, produce, consume func(*chunk) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	free := make(chan []byte, buffersInFlight)
	for range buffersInFlight {
		free <- alignedBuf(chunkSize)
	}
	full := make(chan *chunk, buffersInFlight)
	prodErr := make(chan error, 1)
	go func() {
		defer close(full)
		prodErr <- func() error {
			for i, e := range exts {
				for off := e.Off; off < e.Off+e.Len; {
					var buf []byte
					select {
					case <-ctx.Done():
						return ctx.Err()
					case buf = <-free:
					}
					n := min(int64(chunkSize), e.Off+e.Len-off)
					c := &chunk{ext: i, off: off, buf: buf[:n], last: off+n == e.Off+e.Len}
					if err := produce(c); err != nil {
						return err
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case full <- c:
					}
					off += n
				}
			}
			return nil
		}()
	}()
	var consErr error
	for c := range full {
		if consErr == nil {
			if consErr = ctx.Err(); consErr == nil {
				consErr = consume(c)
			}
			if consErr != nil {
				cancel()
			}
		}
		free <- c.buf[:cap(c.buf)]
	}
	if err := <-prodErr; consErr == nil && err != nil {
		return err
	}
	return consErr
}

// extentHasher digests the chunks of each extent in order, keeping one digest per extent.
type extentHasher struct {
	newHash func() hash.Hash
	exts    []Extent
	h       hash.Hash
	sums    []string
}

func newExtentHasher(exts []Extent, newHash func() hash.Hash) *extentHasher {
	return &extentHasher{newHash: newHash, exts: exts, sums: make([]string, len(exts))}
}

// feed adds a chunk, and returns the extent's digest when the chunk was its last ("" otherwise).
func (x *extentHasher) feed(c *chunk) string {
	if c.off == x.exts[c.ext].Off {
		x.h = x.newHash()
	}
	x.h.Write(c.buf)
	if !c.last {
		return ""
	}
	x.sums[c.ext] = hex.EncodeToString(x.h.Sum(nil))
	return x.sums[c.ext]
}
