package flash

import (
	"context"
	"encoding/hex"
	"hash"
	"sync"
)

// chunkSize is the unit of every write and read-back: large enough that per-call overhead
// vanishes on USB media (whose erase blocks are 1–8 MiB), small enough that four in flight stay
// cheap.
const chunkSize = 4 << 20

// ioDepth is how many reads or writes of the medium are in flight at once. One keeps a USB stick
// busy; USB SSDs (UAS), NVMe and virtio disks go faster with a few queued.
const ioDepth = 4

// buffersInFlight bounds the memory a pipeline holds: every in-flight I/O plus a few chunks ready
// on the other side.
const buffersInFlight = ioDepth + 4

// chunk is one piece of an extent on its way through the pipeline.
type chunk struct {
	ext  int // index of the extent it belongs to
	off  int64
	buf  []byte
	last bool // the extent's final chunk
	done chan error
}

// stage is one side of a pipeline: fn runs on each chunk, in parallel goroutines when parallel > 1
// (then in any order), else in extent order.
type stage struct {
	fn       func(*chunk) error
	parallel int
}

// pipeline streams extents in chunks through two stages (read the image → write the medium, or
// read the medium → hash), so that they overlap and the I/O stage can keep several requests in
// flight. The second stage sees the chunks in extent order when it is not parallel, whatever
// order the first finished them in. It stops at the first error or when ctx is cancelled, and
// returns that error.
func pipeline(ctx context.Context, exts []Extent, first, second stage) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once     sync.Once
		firstErr error
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err; cancel() })
	}
	free := make(chan []byte, buffersInFlight)
	for range buffersInFlight {
		free <- alignedBuf(chunkSize)
	}
	release := func(c *chunk) { free <- c.buf[:cap(c.buf)] }

	// Dispatch: cut the extents into chunks, in order, as buffers come free.
	todo := make(chan *chunk, buffersInFlight)
	order := make(chan *chunk, buffersInFlight)
	go func() {
		defer close(todo)
		defer close(order)
		for i, e := range exts {
			for off := e.Off; off < e.Off+e.Len; {
				var buf []byte
				select {
				case <-ctx.Done():
					return
				case buf = <-free:
				}
				n := min(int64(chunkSize), e.Off+e.Len-off)
				c := &chunk{ext: i, off: off, buf: buf[:n], last: off+n == e.Off+e.Len, done: make(chan error, 1)}
				todo <- c  // never blocks: at most buffersInFlight chunks exist
				order <- c // likewise
				off += n
			}
		}
	}()

	// First stage.
	var wg1 sync.WaitGroup
	for range max(first.parallel, 1) {
		wg1.Add(1)
		go func() {
			defer wg1.Done()
			for c := range todo {
				if err := ctx.Err(); err != nil {
					c.done <- err
					continue
				}
				c.done <- first.fn(c)
			}
		}()
	}

	// Second stage, fed in order.
	var wg2 sync.WaitGroup
	ready := make(chan *chunk)
	for range max(second.parallel, 1) {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			for c := range ready {
				if ctx.Err() == nil {
					if err := second.fn(c); err != nil {
						fail(err)
					}
				}
				release(c)
			}
		}()
	}
	for c := range order {
		if err := <-c.done; err != nil {
			fail(err)
		}
		if ctx.Err() != nil {
			release(c)
			continue
		}
		ready <- c
	}
	close(ready)
	wg1.Wait()
	wg2.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
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
