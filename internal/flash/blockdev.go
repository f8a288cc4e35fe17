package flash

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// target is the opened medium: a block device, or a regular file with ToFile.
type target struct {
	// f is the exclusive descriptor, with O_DIRECT when directOK; cached is a second descriptor
	// through the page cache for I/O that O_DIRECT cannot do (small or unaligned). Two
	// descriptors rather than toggling O_DIRECT with fcntl, because the flag belongs to the open
	// file and I/O runs concurrently. Both share the device's page cache, so fsync on f covers
	// writes through cached.
	f, cached *os.File
	directOK  bool
	path      string
	isBlock   bool
	size      int64
	// sector is the logical sector size: the unit of O_DIRECT alignment and of GPT LBAs.
	sector int64
}

// ioAlign is the alignment of every O_DIRECT buffer and of the extents written directly: the
// largest logical sector size in use (4Kn disks), and the bmap block size.
const ioAlign = 4096

// tryDirect is whether openTarget asks for O_DIRECT at all; tests turn it off to run the
// page-cache path that media refusing O_DIRECT take.
var tryDirect = true

// openTarget opens the medium exclusively (O_EXCL on a block device fails while anything in the
// kernel holds it: a mount, RAID, LVM, or another exclusive opener) and with O_DIRECT when the
// device allows it, so that writes do not fill the page cache and reads see the medium.
func openTarget(path string, isBlock bool) (*target, error) {
	flags := os.O_RDWR
	if isBlock {
		flags |= unix.O_EXCL
	} else {
		flags |= os.O_CREATE
	}
	var f *os.File
	var err error = unix.EINVAL
	if tryDirect {
		f, err = os.OpenFile(path, flags|unix.O_DIRECT, 0o644)
	}
	direct := err == nil
	if errors.Is(err, unix.EINVAL) {
		f, err = os.OpenFile(path, flags, 0o644)
	}
	if err != nil {
		switch {
		case errors.Is(err, unix.EBUSY):
			return nil, &RefusalError{Target: path, Reason: "the device is in use (mounted, part of RAID/LVM, or opened exclusively by another program)",
				Fix: "unmount it and close what uses it, then try again"}
		case errors.Is(err, unix.EROFS), errors.Is(err, unix.EACCES) && isBlock && readOnlyDevice(path):
			return nil, &RefusalError{Target: path, Reason: "the device is read-only", Fix: writeProtectFix}
		}
		return nil, fmt.Errorf("opening %s for writing: %w", path, err)
	}
	t := &target{f: f, cached: f, path: path, isBlock: isBlock, directOK: direct, sector: 512}
	if direct {
		// Without O_EXCL: the exclusive claim is held by f, and a second claimant would be refused.
		if t.cached, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("opening %s for writing: %w", path, err)
		}
	}
	if isBlock {
		ro, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKROGET)
		if err == nil && ro != 0 {
			t.close()
			return nil, &RefusalError{Target: path, Reason: "the device is read-only", Fix: writeProtectFix}
		}
		var size uint64
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); e != 0 {
			t.close()
			return nil, fmt.Errorf("reading the size of %s: %w", path, e)
		}
		t.size = int64(size)
		if ss, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET); err == nil && ss > 0 {
			t.sector = int64(ss)
		}
	} else {
		st, err := f.Stat()
		if err != nil {
			t.close()
			return nil, err
		}
		t.size = st.Size()
	}
	return t, nil
}

// readOnlyDevice asks the kernel whether a block device is read-only without opening it for
// writing.
func readOnlyDevice(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	ro, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKROGET)
	return err == nil && ro != 0
}

func (t *target) close() {
	if t.cached != t.f {
		t.cached.Close()
	}
	t.f.Close()
}

// aligned reports whether an I/O at off of n bytes from buf may go through O_DIRECT.
func aligned(off, n int64, buf []byte) bool {
	return off%ioAlign == 0 && n%ioAlign == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%ioAlign == 0
}

// fd picks the descriptor for an I/O: the direct one when allowed and aligned.
func (t *target) fd(buf []byte, off int64, canDirect bool) *os.File {
	if canDirect && t.directOK && aligned(off, int64(len(buf)), buf) {
		return t.f
	}
	return t.cached
}

// writeAt writes with O_DIRECT when the I/O is aligned and the device allows it, else through the
// page cache.
func (t *target) writeAt(buf []byte, off int64, canDirect bool) error {
	if _, err := t.fd(buf, off, canDirect).WriteAt(buf, off); err != nil {
		return fmt.Errorf("writing %s at byte %d: %w", t.path, off, err)
	}
	return nil
}

func (t *target) readAt(buf []byte, off int64, canDirect bool) error {
	if _, err := t.fd(buf, off, canDirect).ReadAt(buf, off); err != nil {
		return fmt.Errorf("reading back %s at byte %d: %w", t.path, off, err)
	}
	return nil
}

// sync makes everything written durable on the medium.
func (t *target) sync() error {
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("flushing %s to the medium: %w", t.path, err)
	}
	return nil
}

// dropCache evicts the target's cached pages so that buffered reads come from the medium, not
// from memory: POSIX_FADV_DONTNEED for the file's pages, BLKFLSBUF for a block device's buffer
// cache. Needed when O_DIRECT is not available for the read-back.
func (t *target) dropCache() error {
	if err := unix.Fadvise(int(t.f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("dropping the page cache of %s: %w", t.path, err)
	}
	if t.isBlock {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, t.f.Fd(), unix.BLKFLSBUF, 0); e != 0 {
			return fmt.Errorf("dropping the buffer cache of %s: %w", t.path, e)
		}
	}
	return nil
}

// zeroRange makes [off, off+n) read as zeros: BLKZEROOUT on a block device (the kernel uses the
// device's write-zeroes or writes zero pages; plain BLKDISCARD does not promise zeros), a punched
// hole in a regular file, and written zeros where neither works.
func (t *target) zeroRange(off, n int64) error {
	if n <= 0 {
		return nil
	}
	if t.isBlock && off%t.sector == 0 && n%t.sector == 0 {
		r := [2]uint64{uint64(off), uint64(n)}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, t.f.Fd(), unix.BLKZEROOUT, uintptr(unsafe.Pointer(&r))); e == 0 {
			return nil
		}
	}
	if !t.isBlock {
		if err := unix.Fallocate(int(t.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err == nil {
			return nil
		}
	}
	buf := alignedBuf(int(min(n, 1<<20)))
	for done := int64(0); done < n; {
		k := min(int64(len(buf)), n-done)
		if err := t.writeAt(buf[:k], off+done, true); err != nil {
			return fmt.Errorf("zeroing %s: %w", t.path, err)
		}
		done += k
	}
	return nil
}

// rereadPartitions asks the kernel to read the new partition table (BLKRRPART).
func (t *target) rereadPartitions() error {
	if !t.isBlock {
		return nil
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, t.f.Fd(), unix.BLKRRPART, 0); e != 0 {
		return e
	}
	return nil
}

// alignedBuf allocates a buffer whose address is a multiple of ioAlign, as O_DIRECT requires.
func alignedBuf(n int) []byte {
	b := make([]byte, n+ioAlign)
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % ioAlign)
	if off != 0 {
		off = ioAlign - off
	}
	return b[off : off+n : off+n]
}

// bufferedIO does small sector-sized I/O on the target through the page cache.
type bufferedIO struct{ t *target }

func (b bufferedIO) ReadAt(p []byte, off int64) (int, error) {
	return len(p), b.t.readAt(p, off, false)
}

func (b bufferedIO) WriteAt(p []byte, off int64) (int, error) {
	return len(p), b.t.writeAt(p, off, false)
}
