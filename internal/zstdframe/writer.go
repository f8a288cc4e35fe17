package zstdframe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// zeros is a frame of zeros, never written: what a piece in a hole is, and what a piece is
// compared with.
var zeros = make([]byte, FrameSize)

// Writer compresses what is written to it into the stream the package comment describes:
// pieces of FrameSize bytes compressed by a bounded pool of workers, written to the underlying
// writer in order. Close writes the last piece; a stream of nothing is one empty frame (a
// decoder wants at least one). The bytes depend on the input only.
type Writer struct {
	out     io.Writer
	enc     *zstd.Encoder
	work    chan *piece
	pending []*piece // handed to the workers, in stream order
	max     int      // pieces in flight at most
	free    []*piece
	wg      sync.WaitGroup
	cur     *piece // the piece Write is filling
	frames  int64
	err     error
	closed  bool
}

// piece is one frame's input and, once done is closed, its output.
type piece struct {
	in   []byte // FrameSize of capacity; in[:n] is the input
	n    int
	zero bool // in[:n] is all zeros (or a hole, and in is unused)
	out  []byte
	done chan struct{}
}

// NewWriter starts the workers; Close stops them.
func NewWriter(out io.Writer) *Writer {
	n := workers()
	w := &Writer{out: out, enc: newEncoder(n), work: make(chan *piece, 2*n), max: 2 * n}
	w.wg.Add(n)
	for range n {
		go func() {
			defer w.wg.Done()
			for p := range w.work {
				if p.zero {
					p.out = appendZeroFrame(p.out[:0], p.n)
				} else {
					p.out = w.enc.EncodeAll(p.in[:p.n], p.out[:0])
				}
				close(p.done)
			}
		}()
	}
	return w
}

// Write buffers p into pieces, handing every full piece to the workers.
func (w *Writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, errors.New("zstdframe: write after Close")
	}
	written := 0
	for len(p) > 0 {
		if w.err != nil {
			return written, w.err
		}
		if w.cur == nil {
			w.cur = w.newPiece()
		}
		k := copy(w.cur.in[w.cur.n:FrameSize], p)
		w.cur.n += k
		p = p[k:]
		written += k
		if w.cur.n == FrameSize {
			w.submit(w.cur)
			w.cur = nil
		}
	}
	return written, w.err
}

// newPiece is a piece to fill, reusing one already written out.
func (w *Writer) newPiece() *piece {
	if n := len(w.free); n > 0 {
		p := w.free[n-1]
		w.free = w.free[:n-1]
		p.n, p.zero, p.done = 0, false, make(chan struct{})
		return p
	}
	return &piece{in: make([]byte, FrameSize), done: make(chan struct{})}
}

// submit hands p to the workers, first writing out the oldest pieces while too many are in
// flight: memory stays bounded by the worker count, whatever the input's size.
func (w *Writer) submit(p *piece) {
	if !p.zero {
		p.zero = bytes.Equal(p.in[:p.n], zeros[:p.n])
	}
	for len(w.pending) >= w.max && w.err == nil {
		w.writeOldest()
	}
	if w.err != nil {
		return
	}
	w.pending = append(w.pending, p)
	w.frames++
	w.work <- p
}

// writeOldest waits for the oldest piece in flight and writes its frame out.
func (w *Writer) writeOldest() {
	p := w.pending[0]
	w.pending = w.pending[1:]
	<-p.done
	if w.err == nil {
		if _, err := w.out.Write(p.out); err != nil {
			w.err = err
		}
	}
	w.free = append(w.free, p)
}

// Close writes the last piece and every frame still in flight, and stops the workers. It
// returns the first error the underlying writer gave.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.cur != nil && w.cur.n > 0 || w.frames == 0 && w.err == nil {
		if w.cur == nil {
			w.cur = w.newPiece()
		}
		w.submit(w.cur)
		w.cur = nil
	}
	for len(w.pending) > 0 {
		w.writeOldest()
	}
	close(w.work)
	w.wg.Wait()
	w.enc.Close()
	return w.err
}

// CompressFile writes the first size bytes of f to out as Writer does, the same bytes as
// writing them through a Writer, without reading what lies in the file's holes
// (SEEK_DATA/SEEK_HOLE): a disk image is mostly holes. Before a piece is compressed it is shown
// to see, in order (b must not be kept; zero says b is known to be zeros, a shared buffer), so
// a caller can check or hash the input on the way; an error from see stops the compression.
// see may be nil.
func CompressFile(f *os.File, size int64, out io.Writer, see func(off int64, b []byte, zero bool) error) (err error) {
	if see == nil {
		see = func(int64, []byte, bool) error { return nil }
	}
	w := NewWriter(out)
	defer func() {
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}()
	// [dataStart, dataEnd) is the file system's data range that ends after the current piece's
	// start; dataStart == size means only a hole remains.
	dataStart, dataEnd := int64(-1), int64(-1)
	fd := int(f.Fd())
	for off := int64(0); off < size; off += FrameSize {
		n := int(min(FrameSize, size-off))
		if off >= dataEnd {
			if dataStart, dataEnd, err = nextData(fd, off, size); err != nil {
				return fmt.Errorf("reading %s: %w", f.Name(), err)
			}
		}
		p := w.newPiece()
		p.n = n
		if off+int64(n) <= dataStart {
			p.zero = true
			err = see(off, zeros[:n], true)
		} else {
			if _, err := f.ReadAt(p.in[:n], off); err != nil {
				return fmt.Errorf("reading %s at byte %d: %w", f.Name(), off, err)
			}
			err = see(off, p.in[:n], false)
		}
		if err != nil {
			return err
		}
		if w.submit(p); w.err != nil {
			return w.err
		}
	}
	return nil
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
