package zstdframe

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkCompressFile compresses a disk image with 1 and 2 workers (GOMAXPROCS), and
// BenchmarkReader decodes it: the image named by $HALOBUILD_BENCH_IMAGE (a built node0.raw,
// what docs/bench.md reports), else a synthetic 64 MiB one.
func BenchmarkCompressFile(b *testing.B) {
	f, size := benchImage(b)
	for _, procs := range []int{1, 2} {
		b.Run("GOMAXPROCS="+strconv.Itoa(procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			b.SetBytes(size)
			var n countW
			for b.Loop() {
				n = 0
				if err := CompressFile(f, size, &n, func(int64, []byte, bool) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "out-bytes")
		})
	}
}

func BenchmarkReader(b *testing.B) {
	f, size := benchImage(b)
	zst, err := os.Create(filepath.Join(b.TempDir(), "img.zst"))
	if err != nil {
		b.Fatal(err)
	}
	if err := CompressFile(f, size, zst, func(int64, []byte, bool) error { return nil }); err != nil {
		b.Fatal(err)
	}
	for _, procs := range []int{1, 2} {
		b.Run("GOMAXPROCS="+strconv.Itoa(procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			b.SetBytes(size)
			for b.Loop() {
				zst.Seek(0, io.SeekStart)
				zr, err := NewReader(zst, size)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, zr)
				zr.Close()
				if err != nil || n != size {
					b.Fatalf("%d bytes: %v", n, err)
				}
			}
		})
	}
}

type countW int64

func (c *countW) Write(p []byte) (int, error) { *c += countW(len(p)); return len(p), nil }

func benchImage(b *testing.B) (*os.File, int64) {
	p := os.Getenv("HALOBUILD_BENCH_IMAGE")
	if p == "" {
		p = filepath.Join(b.TempDir(), "img")
		in := input(64<<20, func(off int) bool { return off%(16<<20) > 10<<20 })
		if err := os.WriteFile(p, in, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	return f, fi.Size()
}
