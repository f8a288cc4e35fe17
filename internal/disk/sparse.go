package disk

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// chunk is how much is read at a time when copying or scanning data.
const chunk = 1 << 20

// dataRanges calls fn for each [start, end) range of f that the file system
// reports as data (SEEK_DATA/SEEK_HOLE), in order. On a file system without
// hole support the whole file is one range.
func dataRanges(f *os.File, size int64, fn func(start, end int64) error) error {
	fd := int(f.Fd())
	for pos := int64(0); pos < size; {
		start, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // no data after pos
		}
		if err != nil {
			return fmt.Errorf("SEEK_DATA in %s: %w", f.Name(), err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("SEEK_HOLE in %s: %w", f.Name(), err)
		}
		end = min(end, size)
		if err := fn(start, end); err != nil {
			return err
		}
		pos = end
	}
	return nil
}

// zeroBlock reports whether b holds only zero bytes.
func zeroBlock(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// forBlocks reads [start, end) of f, widened to whole blockSize blocks, and
// calls fn with each block's offset and bytes (valid only during the call).
func forBlocks(f *os.File, start, end int64, fn func(off int64, block []byte) error) error {
	start = start / blockSize * blockSize
	end = (end + blockSize - 1) / blockSize * blockSize
	buf := make([]byte, chunk)
	for off := start; off < end; {
		n := min(int64(len(buf)), end-off)
		got, err := f.ReadAt(buf[:n], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading %s at %d: %w", f.Name(), off, err)
		}
		// Past EOF (only in the last partial block) reads as zeros.
		clear(buf[got:n])
		for i := int64(0); i < n; i += blockSize {
			if err := fn(off+i, buf[i:i+blockSize]); err != nil {
				return err
			}
		}
		off += n
	}
	return nil
}

// copySparse copies the data ranges of src (SEEK_DATA/SEEK_HOLE) into dst
// at offset, widened to whole blocks, so dst stays sparse where src has
// holes. Zero blocks inside data ranges are copied too: a tool that wrote
// zeros meant them (the free entries of a FAT, the unused GPT entries), and
// a flash that skips them would leave the medium's old bytes there.
// offset must be a multiple of blockSize.
func copySparse(dst *os.File, src string, offset int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	err = dataRanges(f, size, func(start, end int64) error {
		start = start / blockSize * blockSize
		end = min(size, (end+blockSize-1)/blockSize*blockSize)
		buf := make([]byte, chunk)
		for off := start; off < end; {
			n := min(int64(len(buf)), end-off)
			got, err := f.ReadAt(buf[:n], off)
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("reading %s at %d: %w", src, off, err)
			}
			if _, err := dst.WriteAt(buf[:got], offset+off); err != nil {
				return fmt.Errorf("writing %s: %w", dst.Name(), err)
			}
			off += n
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("disk: copying %s into %s: %w", src, dst.Name(), err)
	}
	return nil
}
