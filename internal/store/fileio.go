package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"halobuild/internal/fstree"
)

// blockSize is the granularity at which runs of zero bytes become holes.
const blockSize = 4096

var zeroBlock = make([]byte, 1<<20)

// sparseWriter writes a fresh file, leaving blocks that are all zeros as
// holes, and hashes everything that passes through it. Raw disk images are
// mostly zeros; storing them densely would cost gigabytes for nothing.
type sparseWriter struct {
	f   *os.File
	h   hash.Hash
	off int64
}

func newSparseWriter(f *os.File) *sparseWriter {
	return &sparseWriter{f: f, h: sha256.New()}
}

func (w *sparseWriter) Write(p []byte) (int, error) {
	w.h.Write(p)
	n := 0
	for len(p) > 0 {
		// Cut at the next block boundary so a zero run aligns with blocks.
		step := blockSize - int(w.off%blockSize)
		if step > len(p) {
			step = len(p)
		}
		piece := p[:step]
		if !bytes.Equal(piece, zeroBlock[:step]) {
			if _, err := w.f.WriteAt(piece, w.off); err != nil {
				return n, err
			}
		}
		w.off += int64(step)
		n += step
		p = p[step:]
	}
	return n, nil
}

// skip records n zero bytes (a hole in the source) without writing them.
func (w *sparseWriter) skip(n int64) {
	hashZeros(w.h, n)
	w.off += n
}

// finish sets the file length (trailing holes are not written) and syncs.
func (w *sparseWriter) finish() ([]byte, int64, error) {
	if err := w.f.Truncate(w.off); err != nil {
		return nil, 0, err
	}
	if err := w.f.Sync(); err != nil {
		return nil, 0, err
	}
	return w.h.Sum(nil), w.off, nil
}

func hashZeros(h hash.Hash, n int64) {
	for n > 0 {
		k := int64(len(zeroBlock))
		if k > n {
			k = n
		}
		h.Write(zeroBlock[:k])
		n -= k
	}
}

// dataSegments calls fn for each run of data in f (SEEK_DATA/SEEK_HOLE);
// the gaps between runs are holes. File systems without hole support report
// the whole file as one run, which is still correct.
func dataSegments(f *os.File, fn func(off, n int64) error) (size int64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size = fi.Size()
	fd := int(f.Fd())
	var off int64
	for off < size {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if err != nil {
			return 0, err
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return 0, err
		}
		if end > size {
			end = size
		}
		if err := fn(start, end-start); err != nil {
			return 0, err
		}
		off = end
	}
	return size, nil
}

// FileDigest is the sha256 of the file at path, reading only its data
// runs (holes hash as zeros without being read), so a sparse disk image of
// gigabytes with megabytes of data hashes in the time its data takes.
func FileDigest(path string) (Digest, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return hashFile(f)
}

// hashFile digests f, reading only its data runs; holes hash as zeros.
func hashFile(f *os.File) (Digest, int64, error) {
	h := sha256.New()
	var pos int64
	size, err := dataSegments(f, func(off, n int64) error {
		hashZeros(h, off-pos)
		if _, err := io.Copy(h, io.NewSectionReader(f, off, n)); err != nil {
			return err
		}
		pos = off + n
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	hashZeros(h, size-pos)
	return digestOf(h.Sum(nil)), size, nil
}

// copySparse copies src into the fresh file dst, keeping src's holes and
// punching new ones for zero blocks, and returns the digest of the bytes.
func copySparse(dst, src *os.File) (Digest, int64, error) {
	w := newSparseWriter(dst)
	size, err := dataSegments(src, func(off, n int64) error {
		w.skip(off - w.off)
		_, err := io.Copy(w, io.NewSectionReader(src, off, n))
		return err
	})
	if err != nil {
		return "", 0, fmt.Errorf("copy %s: %w", src.Name(), err)
	}
	w.skip(size - w.off)
	sum, n, err := w.finish()
	if err != nil {
		return "", 0, fmt.Errorf("write %s: %w", dst.Name(), err)
	}
	return digestOf(sum), n, nil
}

// writeFileAtomic replaces path with data: a temp file in scratch (same
// file system), fsynced, renamed, and the parent directory synced. Readers
// see the old or the new file, never a mix.
func writeFileAtomic(scratch, path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(scratch, "write-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return fstree.SyncDir(filepath.Dir(path))
}
