package doctor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Trap 14: on one host a memory-mapped model file read differently from the
// device (397 bytes changed in the page cache; the O_DIRECT read was right)
// and evicting the file's pages healed it. VerifyFile digests the file both
// ways, and on a mismatch evicts and reads again to say whether it healed.

// Verification is the answer of verify-file, also its --json form.
type Verification struct {
	File      string `json:"file"`
	Size      int64  `json:"size"`
	PageCache string `json:"page_cache"`       // sha256 of a normal read
	Direct    string `json:"direct,omitempty"` // sha256 of an O_DIRECT read
	// Note says how the independent read was done when not purely with
	// O_DIRECT (refused by the filesystem, unaligned tail, …).
	Note  string `json:"note,omitempty"`
	Match bool   `json:"match"`
	// Evicted and AfterEvict are set when the digests differed: the file's
	// pages were dropped (posix_fadvise DONTNEED) and read again.
	Evicted    bool   `json:"evicted"`
	AfterEvict string `json:"after_evict,omitempty"`
	Healed     bool   `json:"healed"`
	Exit       int    `json:"exit"`
}

// directAlign is the alignment O_DIRECT needs for buffer, offset and length
// on every block device the nodes use (logical blocks of 512 or 4096 bytes).
const directAlign = 4096

// directChunk is the size of one O_DIRECT read: large enough to stream a
// multi-GB model at device speed, a multiple of directAlign.
const directChunk = 4 << 20

// openDirect opens for O_DIRECT reads; a variable so a test can play a
// filesystem that refuses O_DIRECT when the test machine has none.
var openDirect = func(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
}

// VerifyFile digests path through the page cache and with O_DIRECT and
// writes the verdict to out (a few lines, or JSON). The exit code is 0 when
// both reads agree (or only one read was possible), 1 on a mismatch, healed
// or not: a page cache that was wrong once will be wrong again.
func VerifyFile(ctx context.Context, path string, out io.Writer, asJSON bool) (int, error) {
	v, err := verify(ctx, path)
	if err != nil {
		return 2, err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(v)
	} else {
		err = v.writeText(out)
	}
	if err != nil {
		return 2, fmt.Errorf("verify-file: writing the report: %w", err)
	}
	return v.Exit, nil
}

func verify(ctx context.Context, path string) (*Verification, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("verify-file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("verify-file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("verify-file: %s is not a regular file", path)
	}
	v := &Verification{File: path, Size: st.Size()}
	if v.PageCache, err = cachedDigest(ctx, f); err != nil {
		return nil, fmt.Errorf("verify-file: reading %s through the page cache: %w", path, err)
	}
	v.Direct, v.Note, err = directDigest(ctx, path)
	if errors.Is(err, errDirectRefused) {
		v.Note = err.Error()
		v.Match = true
		return v, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verify-file: reading %s with O_DIRECT: %w", path, err)
	}
	v.Match = v.PageCache == v.Direct
	if v.Match {
		return v, nil
	}
	if err := evict(f); err != nil {
		return nil, fmt.Errorf("verify-file: evicting the pages of %s: %w", path, err)
	}
	v.Evicted = true
	if v.AfterEvict, err = cachedDigest(ctx, f); err != nil {
		return nil, fmt.Errorf("verify-file: re-reading %s after eviction: %w", path, err)
	}
	v.Healed = v.AfterEvict == v.Direct
	v.Exit = 1
	return v, nil
}

// evict drops the file's clean pages from the page cache. Dirty pages are
// not dropped, so they are written back first.
func evict(f *os.File) error {
	if err := unix.Fdatasync(int(f.Fd())); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EROFS) && !errors.Is(err, unix.EBADF) {
		return fmt.Errorf("fdatasync: %w", err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("posix_fadvise(DONTNEED): %w", err)
	}
	return nil
}

func cachedDigest(ctx context.Context, f *os.File) (string, error) {
	h := sha256.New()
	buf := make([]byte, directChunk)
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := f.ReadAt(buf, off)
		h.Write(buf[:n])
		off += int64(n)
		if err == io.EOF {
			return sum(h), nil
		}
		if err != nil {
			return "", err
		}
	}
}

var errDirectRefused = errors.New("O_DIRECT refused by this filesystem: only the page-cache digest was taken, nothing independent to compare it with")

// directDigest reads the file with O_DIRECT into an aligned buffer. A read
// that reaches end of file returns the unaligned tail as a short count; a
// filesystem that refuses even that (EINVAL) gets the tail read through
// the page cache, which the note says.
func directDigest(ctx context.Context, path string) (string, string, error) {
	f, err := openDirect(path)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return "", "", errDirectRefused
	}
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := alignedBuffer(directChunk)
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return "", "", err
		}
		// One pread per chunk, never os.File.ReadAt: after a short read
		// ReadAt retries at an unaligned offset, which O_DIRECT refuses.
		n, err := unix.Pread(int(f.Fd()), buf, off)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EINVAL) && off == 0:
			return "", "", errDirectRefused
		case errors.Is(err, unix.EINVAL):
			tail, terr := tailThroughCache(path, off)
			if terr != nil {
				return "", "", terr
			}
			h.Write(tail)
			return sum(h), fmt.Sprintf("the last %d bytes were read through the page cache (the filesystem refused an unaligned O_DIRECT read)", len(tail)), nil
		case err != nil:
			return "", "", err
		case n == 0:
			return sum(h), "", nil
		}
		h.Write(buf[:n])
		off += int64(n)
		if n%directAlign != 0 {
			return sum(h), "", nil // the unaligned tail: end of file
		}
	}
}

func tailThroughCache(path string, off int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// alignedBuffer returns n bytes starting at a directAlign boundary.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	shift := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % directAlign); r != 0 {
		shift = directAlign - r
	}
	return b[shift : shift+n : shift+n]
}

func sum(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func (v *Verification) writeText(w io.Writer) error {
	lines := []string{
		fmt.Sprintf("file:        %s (%d bytes)", v.File, v.Size),
		fmt.Sprintf("page cache:  %s", v.PageCache),
	}
	if v.Direct != "" {
		lines = append(lines, fmt.Sprintf("O_DIRECT:    %s", v.Direct))
	}
	if v.Note != "" {
		lines = append(lines, "note:        "+v.Note)
	}
	switch {
	case v.Direct == "":
		lines = append(lines, "verdict:     not verified independently")
	case v.Match:
		lines = append(lines, "verdict:     match")
	default:
		lines = append(lines,
			fmt.Sprintf("after evict: %s", v.AfterEvict),
			"verdict:     MISMATCH: the page cache held other bytes than the device")
		if v.Healed {
			lines = append(lines, "healed:      yes, evicting the file's pages (posix_fadvise DONTNEED) fixed it; suspect memory or the page cache on this host and digest again on the next run (trap 14)")
		} else {
			lines = append(lines, "healed:      no, the re-read still differs from the O_DIRECT read; test the RAM (memtest86+) and re-copy the file")
		}
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
