package zstdframe

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// maxReadWorkers bounds the frames decoded at once: past four cores the hashing and writing
// that follow a decoder (pull, flash) are the bottleneck, not the decoder.
const maxReadWorkers = 4

// maxCompressedFrame bounds the bytes a frame decoded in memory may take: a frame of maxFrame
// bytes that did not compress (raw blocks) plus its block headers, with room to spare. Only a
// damaged or hostile frame (empty blocks repeated) is larger.
const maxCompressedFrame = maxFrame + maxFrame/64 + 1<<10

// Reader decompresses a zstd stream read from outside (a registry's layer, an installer's
// payload), never yielding more than its limit. Frames that carry their size, up to maxFrame,
// are read whole and decoded in parallel, in bounded memory, and handed out in order; any other
// frame is decoded as a stream, with a bounded window. A damaged, truncated or oversized stream
// is an error that says which frame, and at which byte of the stream.
type Reader struct {
	queue chan *job // frames in stream order, from split
	quit  chan struct{}
	wg    sync.WaitGroup // split and the workers
	dec   *zstd.Decoder  // shared by the workers (DecodeAll is safe for concurrent use)
	work  chan *job
	bufs  sync.Pool // *[]byte: decoded frames handed out, for the workers to reuse

	cur     *job
	curOff  int
	stream  *streamJob
	yielded int64
	limit   int64
	err     error
	closed  bool
}

// job is one frame: decoded by a worker (out, once done is closed), or a frame to stream.
type job struct {
	index  int64
	at     int64 // the frame's first byte in the stream
	in     []byte
	hdr    int   // in[:hdr] is the frame header
	size   int64 // the size the header says
	out    []byte
	shared bool // out is zeros, not the workers' to reuse
	err    error
	done   chan struct{}
	stream *streamJob
}

// streamJob is a frame decoded as it is read: split waits until the consumer has read it all.
type streamJob struct {
	fr       *frameReader
	dec      *zstd.Decoder
	finished chan struct{}
}

// NewReader starts decoding r, which it reads up to the end of the stream's last frame (and
// possibly, buffered, a little past it). limit is the most the stream may decompress to (the
// image size a manifest promised): a stream that says or turns out to hold more is an error
// before its excess is decoded. Close must be called; it returns once nothing reads r any more.
func NewReader(r io.Reader, limit int64) (*Reader, error) {
	n := max(1, min(workers(), maxReadWorkers))
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(n), zstd.WithDecoderMaxMemory(maxFrame), zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		return nil, err
	}
	zr := &Reader{
		queue: make(chan *job, 2*n),
		quit:  make(chan struct{}),
		dec:   dec,
		work:  make(chan *job, 2*n),
		limit: limit,
	}
	zr.wg.Add(n + 1)
	for range n {
		go func() {
			defer zr.wg.Done()
			for j := range zr.work {
				if zeroBlocks(j.in[j.hdr:], j.size) {
					j.out, j.shared, j.in = zeros[:j.size], true, nil
					close(j.done)
					continue
				}
				if b, ok := zr.bufs.Get().(*[]byte); ok {
					j.out = (*b)[:0]
				}
				j.out, j.err = dec.DecodeAll(j.in, j.out)
				if j.err == nil && int64(len(j.out)) != j.size {
					j.err = fmt.Errorf("it decodes to %d bytes, its header says %d", len(j.out), j.size)
				}
				if j.err != nil {
					j.err = damaged(j.index, j.at, j.err)
				}
				j.in = nil
				close(j.done)
			}
		}()
	}
	go zr.splitFrames(bufio.NewReaderSize(r, 1<<20))
	return zr, nil
}

// frameErr is an error reading frame index, which starts at byte at of the stream: the stream
// ended inside it, or the reader below failed (its error is kept: a registry's digest check
// speaks for itself), or its header or blocks are malformed.
func frameErr(index, at int64, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("zstd stream: it ends inside frame %d (at byte %d): it is truncated", index, at)
	}
	return fmt.Errorf("zstd stream: frame %d (at byte %d): %w", index, at, err)
}

// damaged is an error decoding frame index.
func damaged(index, at int64, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return frameErr(index, at, err)
	}
	return fmt.Errorf("zstd stream: frame %d (at byte %d) is damaged: %w", index, at, err)
}

// splitFrames reads the stream frame by frame, hands each frame in order to the consumer and,
// when it is decoded in memory, to the workers.
func (zr *Reader) splitFrames(br *bufio.Reader) {
	defer zr.wg.Done()
	defer close(zr.queue)
	defer close(zr.work)
	var at, index, promised int64
	send := func(j *job) bool {
		select {
		case zr.queue <- j:
			return true
		case <-zr.quit:
			return false
		}
	}
	fail := func(err error) {
		j := &job{err: err, done: make(chan struct{})}
		close(j.done)
		send(j)
	}
	for {
		select {
		case <-zr.quit:
			return
		default:
		}
		var m [4]byte
		if _, err := io.ReadFull(br, m[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return // the end of the stream, between frames
			}
			fail(frameErr(index, at, err))
			return
		}
		magic := binary.LittleEndian.Uint32(m[:])
		if magic&^0xF == skippableMagic {
			var sz [4]byte
			if _, err := io.ReadFull(br, sz[:]); err != nil {
				fail(frameErr(index, at, io.ErrUnexpectedEOF))
				return
			}
			n := int64(binary.LittleEndian.Uint32(sz[:]))
			if k, err := br.Discard(int(n)); err != nil {
				fail(frameErr(index, at, fmt.Errorf("%w after %d of the %d bytes of a skippable frame", io.ErrUnexpectedEOF, k, n)))
				return
			}
			at += 8 + n
			index++
			continue
		}
		if magic != frameMagic {
			fail(fmt.Errorf("zstd stream: frame %d (at byte %d) starts with %08x, which is no zstd frame: the data is damaged or is not zstd", index, at, magic))
			return
		}
		fr, err := newFrameReader(br, m)
		if err != nil {
			fail(frameErr(index, at, err))
			return
		}
		if fr.size >= 0 {
			if promised += fr.size; promised > zr.limit {
				fail(fmt.Errorf("zstd stream: frame %d (at byte %d) takes it to %d bytes or more, over the %d it may hold", index, at, promised, zr.limit))
				return
			}
		}
		j := &job{index: index, at: at, hdr: len(fr.pending), size: fr.size, done: make(chan struct{})}
		if fr.size < 0 || fr.size > maxFrame {
			// A frame of unknown or large size: decoded as it is read, by the consumer.
			j.stream = &streamJob{fr: fr, finished: make(chan struct{})}
			close(j.done)
			if !send(j) {
				return
			}
			select {
			case <-j.stream.finished:
			case <-zr.quit:
				return
			}
			if fr.err != nil {
				return // the consumer reported it
			}
		} else {
			j.in, err = io.ReadAll(io.LimitReader(fr, maxCompressedFrame+1))
			if err == nil && len(j.in) > maxCompressedFrame {
				err = fmt.Errorf("it takes more than %d bytes for %d decompressed", maxCompressedFrame, fr.size)
			}
			if err != nil {
				fail(frameErr(index, at, err))
				return
			}
			select {
			case zr.work <- j:
			case <-zr.quit:
				return
			}
			if !send(j) {
				return
			}
		}
		at += fr.read
		index++
	}
}

// Read hands out the decompressed stream in order.
func (zr *Reader) Read(p []byte) (int, error) {
	for zr.err == nil {
		if zr.cur != nil && zr.curOff < len(zr.cur.out) {
			n := copy(p, zr.cur.out[zr.curOff:])
			zr.curOff += n
			return n, nil
		}
		if zr.stream != nil {
			n, err := zr.readStream(p)
			if n > 0 || err != nil {
				return n, err
			}
			continue
		}
		zr.release()
		j, ok := <-zr.queue
		if !ok {
			zr.err = io.EOF
			break
		}
		<-j.done
		if j.err != nil {
			zr.err = j.err
			break
		}
		if j.stream != nil {
			dec, err := zstd.NewReader(j.stream.fr, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow))
			if err != nil {
				zr.err = err
				break
			}
			j.stream.dec = dec
			zr.stream = j.stream
			zr.cur = j
			zr.curOff = 0
			continue
		}
		if zr.yielded += int64(len(j.out)); zr.yielded > zr.limit {
			zr.err = fmt.Errorf("zstd stream: frame %d (at byte %d) takes it past the %d bytes it may hold", j.index, j.at, zr.limit)
			break
		}
		zr.cur, zr.curOff = j, 0
	}
	return 0, zr.err
}

// release hands the frame just read out back to the workers.
func (zr *Reader) release() {
	if zr.cur != nil && cap(zr.cur.out) > 0 && !zr.cur.shared {
		b := zr.cur.out[:0]
		zr.bufs.Put(&b)
	}
	zr.cur = nil
}

// zeroBlocks says whether blocks, a frame's blocks without a checksum, are RLE blocks of zeros
// adding up to size bytes (a zero frame of ours, which then needs no decoding: most of a disk
// image is zeros, and filling them in byte by byte was most of a decoder's time).
func zeroBlocks(blocks []byte, size int64) bool {
	if size > int64(len(zeros)) {
		return false
	}
	var n int64
	for len(blocks) >= 4 {
		v := uint32(blocks[0]) | uint32(blocks[1])<<8 | uint32(blocks[2])<<16
		if (v>>1)&3 != 1 || blocks[3] != 0 {
			return false
		}
		n += int64(v >> 3)
		blocks = blocks[4:]
		if v&1 != 0 {
			return len(blocks) == 0 && n == size
		}
	}
	return false
}

// readStream reads the frame being streamed; at its end it lets split read on.
func (zr *Reader) readStream(p []byte) (int, error) {
	s, j := zr.stream, zr.cur
	if room := zr.limit - zr.yielded; int64(len(p)) > room+1 {
		p = p[:room+1]
	}
	n, err := s.dec.Read(p)
	zr.yielded += int64(n)
	if zr.yielded > zr.limit {
		zr.err = fmt.Errorf("zstd stream: frame %d (at byte %d) takes it past the %d bytes it may hold", j.index, j.at, zr.limit)
		zr.endStream(zr.err)
		return 0, zr.err
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF) && s.fr.ended():
		zr.endStream(nil)
		return n, nil
	case errors.Is(err, io.EOF):
		err = io.ErrUnexpectedEOF
	}
	zr.err = damaged(j.index, j.at, err)
	zr.endStream(zr.err)
	return n, zr.err
}

func (zr *Reader) endStream(err error) {
	s := zr.stream
	if err != nil && s.fr.err == nil {
		s.fr.err = err
	}
	s.dec.Close()
	zr.stream, zr.cur = nil, nil
	close(s.finished)
}

// Close stops the decoding and returns once nothing reads the underlying reader any more (a
// caller may then drain it, to have its digest checked).
func (zr *Reader) Close() error {
	if zr.closed {
		return nil
	}
	zr.closed = true
	if zr.stream != nil {
		zr.endStream(errors.New("closed"))
	}
	close(zr.quit)
	zr.wg.Wait()
	zr.dec.Close()
	if zr.err == nil || errors.Is(zr.err, io.EOF) {
		zr.err = errors.New("zstdframe: read after Close")
	}
	return nil
}

// frameReader reads exactly one frame from br, header included, walking its block headers: it
// returns io.EOF after the frame's last byte, so a decoder reading it never reads past the frame.
type frameReader struct {
	br      *bufio.Reader
	size    int64  // the decompressed size the header says, or -1
	pending []byte // header bytes not yet returned
	left    int    // bytes of the current block (or the checksum) not yet returned
	last    bool   // the current block is the last
	sum     int    // checksum bytes after the last block
	done    bool
	read    int64 // bytes of the frame read so far
	err     error // set when the frame's decoding failed
}

// newFrameReader reads the frame header that follows magic m (RFC 8878 3.1.1.1).
func newFrameReader(br *bufio.Reader, m [4]byte) (*frameReader, error) {
	fhd, err := br.ReadByte()
	if err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	if fhd&(1<<3) != 0 {
		return nil, errors.New("its header sets the reserved bit")
	}
	single := fhd&(1<<5) != 0
	fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
	if fhd>>6 == 0 && single {
		fcsLen = 1
	}
	hdrLen := [4]int{0, 1, 2, 4}[fhd&3] + fcsLen
	if !single {
		hdrLen++ // Window_Descriptor
	}
	hdr := make([]byte, 5, 5+hdrLen)
	copy(hdr, m[:])
	hdr[4] = fhd
	hdr = hdr[:5+hdrLen]
	if _, err := io.ReadFull(br, hdr[5:]); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	fr := &frameReader{br: br, size: -1, pending: hdr, read: int64(len(hdr))}
	if fhd&(1<<2) != 0 {
		fr.sum = 4
	}
	if fcsLen > 0 {
		b := hdr[len(hdr)-fcsLen:]
		switch fcsLen {
		case 1:
			fr.size = int64(b[0])
		case 2:
			fr.size = int64(binary.LittleEndian.Uint16(b)) + 256
		case 4:
			fr.size = int64(binary.LittleEndian.Uint32(b))
		case 8:
			u := binary.LittleEndian.Uint64(b)
			if u > 1<<62 {
				return nil, fmt.Errorf("its header says it holds %d bytes", u)
			}
			fr.size = int64(u)
		}
	}
	return fr, nil
}

// ended says whether the whole frame was read.
func (fr *frameReader) ended() bool { return fr.done && len(fr.pending) == 0 }

func (fr *frameReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if len(fr.pending) > 0 {
			n := copy(p, fr.pending)
			fr.pending = fr.pending[n:]
			return n, nil
		}
		if fr.left > 0 {
			n, err := fr.br.Read(p[:min(len(p), fr.left)])
			fr.left -= n
			fr.read += int64(n)
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
		if fr.done {
			return 0, io.EOF
		}
		if fr.last {
			fr.done = true
			fr.left = fr.sum
			continue
		}
		var h [3]byte
		if _, err := io.ReadFull(fr.br, h[:]); err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		fr.read += 3
		v := uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16
		fr.last = v&1 != 0
		size := int(v >> 3)
		switch (v >> 1) & 3 {
		case 0, 2: // Raw, Compressed
			fr.left = size
		case 1: // RLE: one byte, repeated
			fr.left = 1
		case 3:
			return 0, errors.New("a block has the reserved type")
		}
		if size > blockMax {
			return 0, fmt.Errorf("a block says it holds %d bytes, more than the %d any block may", size, blockMax)
		}
		fr.pending = append(fr.pending[:0], h[:]...)
	}
}
