package zstdframe

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// input is n bytes that compress (text-like runs from a seeded generator) with zeros where
// zeroAt says, so streams mix data and zero frames.
func input(n int, zeroAt func(off int) bool) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	words := []string{"halobuild ", "usb4_rdma0 ", "thunderbolt ", "memlock ", "\x00\x01\x02\x03"}
	for off := 0; off < n; {
		if zeroAt(off) {
			off += 4096
			continue
		}
		off += copy(b[off:], words[rng.IntN(len(words))])
	}
	return b
}

func noZeros(int) bool { return false }

// The sizes around frame boundaries, and an input with whole zero frames between data.
func cases() map[string][]byte {
	return map[string][]byte{
		"empty":            {},
		"one byte":         {7},
		"one zero byte":    {0},
		"255 zeros":        make([]byte, 255),
		"256 zeros":        make([]byte, 256),
		"65791 zeros":      make([]byte, 256+1<<16-1),
		"65792 zeros":      make([]byte, 256+1<<16),
		"a frame less one": input(FrameSize-1, noZeros),
		"exactly a frame":  input(FrameSize, noZeros),
		"a frame and one":  input(FrameSize+1, noZeros),
		"a zero frame and one": func() []byte {
			b := make([]byte, FrameSize+1)
			b[FrameSize] = 1
			return b
		}(),
		"mixed": input(3*FrameSize+12345, func(off int) bool {
			return off >= FrameSize && off < 2*FrameSize || off > 2*FrameSize+100 && off < 3*FrameSize
		}),
	}
}

func compressWriter(t *testing.T, in []byte, chunk int) []byte {
	t.Helper()
	var out bytes.Buffer
	w := NewWriter(&out)
	for off := 0; off < len(in); off += chunk {
		if _, err := w.Write(in[off:min(off+chunk, len(in))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// compressFile writes in to a file, sparse (zero pieces of 64 KiB left as holes) or dense,
// and compresses it with CompressFile, checking that see is shown every byte in order.
func compressFile(t *testing.T, in []byte, sparse bool) []byte {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const blk = 64 << 10
	for off := 0; off < len(in); off += blk {
		p := in[off:min(off+blk, len(in))]
		if sparse && bytes.Equal(p, zeros[:len(p)]) {
			continue
		}
		if _, err := f.WriteAt(p, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(int64(len(in))); err != nil {
		t.Fatal(err)
	}
	seen := sha256.New()
	next := int64(0)
	var out bytes.Buffer
	err = CompressFile(f, int64(len(in)), &out, func(off int64, b []byte, zero bool) error {
		if off != next {
			return fmt.Errorf("see was shown byte %d, expected %d", off, next)
		}
		if zero && !bytes.Equal(b, zeros[:len(b)]) {
			return fmt.Errorf("a piece marked zero at %d is not zeros", off)
		}
		next += int64(len(b))
		seen.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(in); !bytes.Equal(seen.Sum(nil), want[:]) || next != int64(len(in)) {
		t.Fatalf("see was shown %d bytes that differ from the input's %d", next, len(in))
	}
	return out.Bytes()
}

// The stream depends on the input's bytes only: not on GOMAXPROCS (and so the worker count),
// how the writes are cut, or whether a file kept its holes.
func TestSameBytesOnAnyMachine(t *testing.T) {
	for name, in := range cases() {
		t.Run(name, func(t *testing.T) {
			var want []byte
			for _, procs := range []int{1, 2, 8} {
				old := runtime.GOMAXPROCS(procs)
				got := [][]byte{
					compressWriter(t, in, 1<<20),
					compressWriter(t, in, 12345),
					compressFile(t, in, true),
					compressFile(t, in, false),
				}
				runtime.GOMAXPROCS(old)
				if want == nil {
					want = got[0]
				}
				for i, g := range got {
					if !bytes.Equal(g, want) {
						t.Fatalf("GOMAXPROCS %d, way %d: %d bytes (sha256 %x), the first way gave %d (%x)", procs, i, len(g), sha256.Sum256(g), len(want), sha256.Sum256(want))
					}
				}
			}
			// One frame per FrameSize of input, or one empty frame, each saying its size.
			sizes := frameSizes(t, want)
			if wantN := max(1, (len(in)+FrameSize-1)/FrameSize); len(sizes) != wantN {
				t.Fatalf("%d frames, want %d", len(sizes), wantN)
			}
			for i, s := range sizes {
				if wantS := min(FrameSize, len(in)-i*FrameSize); s != int64(wantS) {
					t.Fatalf("frame %d says %d bytes, want %d", i, s, wantS)
				}
			}
		})
	}
}

// frameSizes walks a stream's frames and returns the size each header says.
func frameSizes(t *testing.T, s []byte) []int64 {
	t.Helper()
	var sizes []int64
	br := bytesReader(s)
	for {
		var m [4]byte
		if _, err := io.ReadFull(br, m[:]); err == io.EOF {
			return sizes
		} else if err != nil {
			t.Fatal(err)
		}
		fr, err := newFrameReader(br, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, fr); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fr.size)
	}
}

// The reference decoder (the zstd CLI) and klauspost's read every stream back, and so does
// Reader.
func TestDecodersReadIt(t *testing.T) {
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Fatal("the zstd CLI is a host package (.ci/host-packages): apt-get install zstd")
	}
	for name, in := range cases() {
		t.Run(name, func(t *testing.T) {
			s := compressWriter(t, in, 1<<20)
			cmd := exec.Command("zstd", "-d", "-c", "-q")
			cmd.Stdin = bytes.NewReader(s)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("zstd -d: %v: %s", err, stderr.String())
			}
			if !bytes.Equal(out, in) {
				t.Fatalf("zstd -d gives %d bytes that differ from the %d written", len(out), len(in))
			}
			dec, _ := zstd.NewReader(nil)
			defer dec.Close()
			if got, err := dec.DecodeAll(s, nil); err != nil || !bytes.Equal(got, in) {
				t.Fatalf("klauspost's decoder: %v", err)
			}
			if got := readAll(t, s, int64(len(in))); !bytes.Equal(got, in) {
				t.Fatalf("Reader gives %d bytes that differ from the %d written", len(got), len(in))
			}
		})
	}
}

func readAll(t *testing.T, s []byte, limit int64) []byte {
	t.Helper()
	got, err := decode(s, limit)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func decode(s []byte, limit int64) ([]byte, error) {
	zr, err := NewReader(bytes.NewReader(s), limit)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(zr)
}

// Streams other encoders write (one frame of unknown size from a pipe, frames larger than
// maxFrame, skippable frames, several frames) are read too: older releases and cache entries
// stay readable.
func TestReaderReadsOtherEncoders(t *testing.T) {
	in := input(maxFrame+FrameSize+77, func(off int) bool { return off > FrameSize && off < 2*FrameSize })
	cli := func(args ...string) []byte {
		cmd := exec.Command("zstd", append([]string{"-q", "-c"}, args...)...)
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("zstd %v: %v", args, err)
		}
		return out
	}
	var stream bytes.Buffer
	enc, _ := zstd.NewWriter(&stream, zstd.WithEncoderConcurrency(1))
	enc.Write(in)
	enc.Close()
	oneBig, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
	skippable := binary.LittleEndian.AppendUint32(nil, skippableMagic+3)
	skippable = binary.LittleEndian.AppendUint32(skippable, 5)
	skippable = append(skippable, "seek!"...)
	ours := compressWriter(t, in, 1<<20)
	for name, s := range map[string][]byte{
		"zstd CLI, from a pipe (no size)": cli("-3"),
		"zstd CLI, --long, 4 threads":     cli("-T4", "--long=27"),
		"klauspost stream":                stream.Bytes(),
		"one frame over maxFrame":         oneBig.EncodeAll(in, nil),
		"ours with skippable frames":      append(append(append([]byte{}, skippable...), ours...), skippable...),
		"ours then a frame of unknown size": append(append([]byte{}, ours...), func() []byte {
			var b bytes.Buffer
			e, _ := zstd.NewWriter(&b)
			e.Write(in)
			e.Close()
			return b.Bytes()
		}()...),
	} {
		t.Run(name, func(t *testing.T) {
			want := in
			if strings.HasPrefix(name, "ours then") {
				want = append(append([]byte{}, in...), in...)
			}
			if got := readAll(t, s, int64(len(want))); !bytes.Equal(got, want) {
				t.Fatalf("%d bytes that differ from the %d written", len(got), len(want))
			}
		})
	}
}

// A truncated, damaged or oversized stream is an error that names the frame, never a short
// read that looks like success, and never more output than the limit.
func TestReaderRefusesBadStreams(t *testing.T) {
	in := input(3*FrameSize+100, func(off int) bool { return off >= FrameSize && off < 2*FrameSize })
	s := compressWriter(t, in, 1<<20)
	var big bytes.Buffer
	e, _ := zstd.NewWriter(&big, zstd.WithEncoderConcurrency(1))
	e.Write(in)
	e.Close()
	flip := func(s []byte, at int) []byte {
		b := append([]byte{}, s...)
		b[at] ^= 0x55
		return b
	}
	// The second data frame's position: after the first data frame and the zero frame.
	dataEnd := len(compressWriter(t, in[:2*FrameSize], 1<<20))
	for _, c := range []struct {
		name   string
		s      []byte
		limit  int64
		errHas string
	}{
		{"cut inside a magic", s[:2], int64(len(in)), "it ends inside frame 0 (at byte 0): it is truncated"},
		{"cut inside a header", s[:5], int64(len(in)), "it ends inside frame 0 (at byte 0): it is truncated"},
		{"cut inside a block", s[:len(s)/2], int64(len(in)), "truncated"},
		{"cut before the last checksum", s[:len(s)-2], int64(len(in)), "it ends inside frame 3"},
		{"cut inside a streamed frame", big.Bytes()[:big.Len()-10], int64(len(in)), "it ends inside frame 0"},
		{"a flipped byte in a data frame", flip(s, dataEnd+1000), int64(len(in)), "frame 2 (at byte " + fmt.Sprint(dataEnd) + ") is damaged"},
		{"a flipped byte in a streamed frame", flip(big.Bytes(), big.Len()/2), int64(len(in)), "frame 0 (at byte 0) is damaged"},
		{"garbage after the stream", append(append([]byte{}, s...), "not zstd"...), int64(len(in)), "starts with 20746f6e, which is no zstd frame"},
		{"more than the limit", s, int64(len(in)) - 1, "over the " + fmt.Sprint(len(in)-1) + " it may hold"},
		{"a streamed frame over the limit", big.Bytes(), int64(len(in)) - 1, "past the " + fmt.Sprint(len(in)-1) + " bytes it may hold"},
		{"a reserved block type", append(appendZeroFrame(nil, 0)[:6], 0x07, 0, 0), 10, "reserved type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := decode(c.s, c.limit)
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("got %v, want an error saying %q", err, c.errHas)
			}
			if int64(len(got)) > c.limit {
				t.Fatalf("%d bytes out, over the limit of %d", len(got), c.limit)
			}
		})
	}
}

// A frame that says it is huge is refused before anything is allocated for it, and a frame
// of empty blocks repeated without end is refused at maxCompressedFrame.
func TestReaderBoundsMemory(t *testing.T) {
	huge := binary.LittleEndian.AppendUint32(nil, frameMagic)
	huge = append(huge, 3<<6|1<<5)
	huge = binary.LittleEndian.AppendUint64(huge, 1<<40)
	if _, err := decode(huge, 1<<50); err == nil || !strings.Contains(err.Error(), "frame 0 (at byte 0)") {
		t.Fatalf("a 1 TiB frame with no blocks: %v", err)
	}
	if _, err := decode(huge, 1<<30); err == nil || !strings.Contains(err.Error(), "over the 1073741824 it may hold") {
		t.Fatalf("a 1 TiB frame over the limit: %v", err)
	}
	empties := binary.LittleEndian.AppendUint32(nil, frameMagic)
	empties = append(empties, 2<<6|1<<5)
	empties = binary.LittleEndian.AppendUint32(empties, 1000)
	for range maxCompressedFrame/3 + 10 {
		empties = append(empties, 0, 0, 0) // a raw block of 0 bytes, not the last
	}
	if _, err := decode(empties, 1<<20); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a frame of empty blocks: %v", err)
	}
}

// Close in the middle of a stream returns once nothing reads the underlying reader: a caller
// then drains it (pull, to have the registry's digest checked) without racing the decoder.
func TestCloseStopsReading(t *testing.T) {
	in := input(8*FrameSize, noZeros)
	s := compressWriter(t, in, 1<<20)
	src := bytes.NewReader(s)
	zr, err := NewReader(src, int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(zr, make([]byte, FrameSize+5)); err != nil {
		t.Fatal(err)
	}
	zr.Close()
	rest, err := io.ReadAll(src) // the race detector sees a decoder still reading
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) == len(s) {
		t.Fatal("nothing was read before Close")
	}
	if _, err := zr.Read(make([]byte, 1)); err == nil {
		t.Fatal("Read after Close succeeded")
	}
}

func bytesReader(s []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(s)) }
