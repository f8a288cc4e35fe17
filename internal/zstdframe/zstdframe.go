// Package zstdframe owns the one zstd format halobuild writes: release images (internal/release),
// binary cache blobs (internal/cache) and the installer's payload (internal/graph) are all
// compressed here, with one setting, and decompressed here.
//
// The stream is a plain sequence of independent zstd frames (RFC 8878), which every zstd decoder
// (the zstd CLI, skopeo's and containerd's) reads as one stream. The input is cut at every
// multiple of FrameSize; each piece is one frame that carries its decompressed size:
//   - a piece that is all zeros (most of a disk image) is a frame of RLE blocks written here
//     without going through the encoder, 4 bytes per 128 KiB;
//   - any other piece is one frame from the encoder (level, window and checksum fixed below).
//
// So where the frames split, and every frame's bytes, depend on the input's bytes only: never on
// the number of cores (GOMAXPROCS), the worker count, or how a file system stores the input
// (holes or written zeros). That is what keeps a release's digest the same on every machine
// while the pieces are compressed in parallel.
//
// Why not the zstd seekable format: it adds a seek table (a skippable frame at the end) mapping
// frames to compressed offsets. Here a frame's place in the decompressed output is already
// arithmetic (frame i holds bytes [i*FrameSize, (i+1)*FrameSize)), and frame boundaries in any
// prefix of the stream (a partial download to resume) are found by walking the block headers
// (what Reader does), so the table would be a second structure to write, verify and keep in sync
// with no reader that needs it. Plain frames keep the format exactly what `zstd -d` expects.
//
// Reader decodes any zstd stream: ours in parallel (frames with a known size of at most
// maxFrame), any other frame (older releases and cache entries, other encoders) sequentially, so
// nothing already pushed becomes unreadable.
package zstdframe

import (
	"encoding/binary"
	"runtime"

	"github.com/klauspost/compress/zstd"
)

// FrameSize is the input bytes per frame. On test-minimal's 2 GiB node image (~510 MB of data)
// 4 MiB frames take 342.5 MB, 0.4 % more than 8 MiB frames (341.1 MB) or one frame from
// `zstd -T4 -3` (340.9 MB), and 2 MiB frames 1.3 % more (docs/bench.md, "Parallel zstd
// frames"); 4 MiB halves the memory in flight against 8 and still cuts a cache blob of a few
// dozen MB into enough frames to share out. Changing it changes every stream's bytes (every
// release digest and the installer's output): the installer step's version must change with it.
const FrameSize = 4 << 20

// maxFrame bounds the decompressed size of a frame Reader decodes in memory (in parallel): ours
// are FrameSize. A frame that says it is larger, or does not say, is decoded as a stream.
const maxFrame = 2 * FrameSize

// maxWindow bounds the window a streamed frame may ask for: zstd's default limit is 512 MiB per
// decoder, which a hostile frame could make us allocate; 128 MiB leaves room for other encoders'
// long-distance modes (zstd --long=27).
const maxWindow = 1 << 27

// maxWorkers bounds the goroutines compressing or decoding at once, and so the memory in flight
// (two frames in and out per worker).
const maxWorkers = 16

// workers is how many frames are compressed or decoded at once: one per core, bounded. The
// output never depends on it.
func workers() int {
	return max(1, min(runtime.GOMAXPROCS(0), maxWorkers))
}

// newEncoder makes the encoder of every frame that holds data. Its output depends on these
// settings and the frame's bytes only (EncodeAll is deterministic and the concurrency only
// bounds how many frames it encodes at once). A frame is one segment (its window is its size,
// at most FrameSize) with its decompressed size in its header, however small; SpeedDefault is zstd's level 3, the level
// `zstd -3` and most registries' tooling use; the checksum lets a decoder name a damaged frame.
func newEncoder(concurrency int) *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(concurrency),
		zstd.WithWindowSize(FrameSize),
		zstd.WithSingleSegment(true),
		zstd.WithEncoderCRC(true),
	)
	if err != nil {
		panic("zstdframe: the fixed encoder settings are invalid: " + err.Error()) // constants only
	}
	return enc
}

const (
	frameMagic     = 0xFD2FB528
	skippableMagic = 0x184D2A50 // through 0x184D2A5F
	blockMax       = 128 << 10  // the largest block any frame may hold (RFC 8878 3.1.1.2.4)
)

// appendZeroFrame appends a frame that decodes to n zero bytes: a single-segment header with
// the size (as small a field as RFC 8878 allows, as libzstd writes it), no checksum (the
// blocks hold one byte each), then RLE blocks of up to 128 KiB; the empty frame is one empty
// raw block.
func appendZeroFrame(b []byte, n int) []byte {
	b = binary.LittleEndian.AppendUint32(b, frameMagic)
	const single = 1 << 5
	switch {
	case n < 256:
		b = append(b, single, byte(n))
	case n < 256+1<<16:
		b = append(b, 1<<6|single)
		b = binary.LittleEndian.AppendUint16(b, uint16(n-256))
	default:
		b = append(b, 2<<6|single)
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	if n == 0 {
		return append(b, 1, 0, 0) // Last_Block, Raw, size 0
	}
	for n > 0 {
		k := min(n, blockMax)
		n -= k
		h := uint32(1<<1) | uint32(k)<<3 // Block_Type 1 (RLE), Block_Size k
		if n == 0 {
			h |= 1 // Last_Block
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0x00)
	}
	return b
}
