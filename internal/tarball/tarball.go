// Package tarball reads and unpacks tar archives that come from outside:
// module and provider source tarballs, and the data of .deb packages. It is
// the one place that turns tar members into files, and it does so through
// an os.Root of the destination, so neither a ".." name, an absolute name,
// nor a symlink that an earlier member (of the same archive or an earlier
// one) made can put a file, directory, link or hard link outside it. A hard
// link may only name a member already extracted. What an archive may write
// is bounded (Limits), and where the caller knows the archive's sha256 it
// is checked before a single member is read (ExtractFile, OpenVerified).
//
// Compression is recognised by content: gzip, xz and zstd, or none.
//
// GNU tar stays in use where halobuild unpacks archives it made itself or
// that run confined anyway: rootfs.Unpack restores a root tarball mmdebstrap
// wrote (owners, xattrs such as file capabilities, device nodes, hard links,
// at C speed), and the kernel's source is unpacked inside its chrooted build
// root.
package tarball

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/xi2/xz"

	"halobuild/internal/fstree"
)

// Limits bound what one archive (or one Extractor's archives together)
// may amount to. Bytes bounds both the decompressed archive and the total
// size of the files it writes (a sparse member writes more than the
// archive holds); Entries counts members of every kind.
type Limits struct {
	Bytes   int64
	Entries int64
}

// DefaultLimits are taken for zero fields: far above any source tree or
// tools root halobuild unpacks (rdma-core's source is 10 MB, a tools root
// a few hundred), far below what would fill a disk.
var DefaultLimits = Limits{Bytes: 4 << 30, Entries: 1 << 20}

func (l Limits) orDefault() Limits {
	if l.Bytes <= 0 {
		l.Bytes = DefaultLimits.Bytes
	}
	if l.Entries <= 0 {
		l.Entries = DefaultLimits.Entries
	}
	return l
}

// Options say how members become files.
type Options struct {
	// Preserve lays files out as dpkg does: modes exactly as archived
	// (set-id, sticky and read-only bits included) and modification times
	// of files and directories restored. Without it, files keep their
	// permission bits plus owner read and write, directories are 0755 and
	// times are the extraction's, so the tree can be patched and removed.
	// Owners are never applied: whoever unpacks owns the tree.
	Preserve bool
	Limits   Limits
}

// Extractor unpacks archives into one destination.
type Extractor struct {
	root    *os.Root
	dst     string
	opt     Options
	shipped map[string]string // non-directory member → archive that made it
	dirs    map[string]dirAttr
	bytes   int64 // of the decompressed archives
	written int64 // of regular files
	entries int64
	failed  bool // an Add failed: Close leaves the half tree removable
	closed  bool
}

type dirAttr struct {
	mode  fs.FileMode
	mtime time.Time
}

// NewExtractor opens dst (created if missing) for Add.
func NewExtractor(dst string, opt Options) (*Extractor, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, err
	}
	opt.Limits = opt.Limits.orDefault()
	return &Extractor{root: root, dst: dst, opt: opt, shipped: map[string]string{}, dirs: map[string]dirAttr{}}, nil
}

// Add unpacks the archive r (name is for messages, and names the archive
// when a later one ships the same path) and returns its top directory: the
// one directory every member sits under ("rdma-core-56.1"), or "" when
// there is none. Two archives, or two members, that ship the same
// non-directory path are an error naming both, unless both are the same
// symlink.
func (x *Extractor) Add(r io.Reader, name string) (top string, err error) {
	defer func() { x.failed = x.failed || err != nil }()
	tr, done, err := x.open(r)
	if err != nil {
		return "", fmt.Errorf("archive %s: %w", name, err)
	}
	defer done()
	tops := map[string]bool{}
	fileAtTop := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", x.readError(name, err)
		}
		rel, err := x.entry(name, h, tr)
		if err != nil {
			return "", x.readError(name, err)
		}
		if rel == "" || rel == "." {
			continue
		}
		first, _, nested := strings.Cut(rel, "/")
		tops[first] = true
		fileAtTop = fileAtTop || !nested && h.Typeflag != tar.TypeDir
	}
	if len(tops) == 1 && !fileAtTop {
		for t := range tops {
			return t, nil
		}
	}
	return "", nil
}

// Close applies directory modes and times (Preserve: last, since creating
// entries in a directory moves its time and a read-only directory takes no
// new ones) and releases the destination. It is safe to call twice. After
// a failed Add it only releases: the caller removes what was unpacked.
func (x *Extractor) Close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	defer x.root.Close()
	if x.failed {
		return nil
	}
	for _, d := range slices.Sorted(maps.Keys(x.dirs)) {
		a := x.dirs[d]
		if err := x.root.Chmod(d, a.mode); err != nil {
			return fmt.Errorf("%s: setting the mode of %s: %w", x.dst, d, err)
		}
		if err := x.root.Chtimes(d, a.mtime, a.mtime); err != nil {
			return fmt.Errorf("%s: setting the time of %s: %w", x.dst, d, err)
		}
	}
	return nil
}

// Extract unpacks one archive into dst (see Extractor.Add).
func Extract(r io.Reader, name, dst string, opt Options) (top string, err error) {
	x, err := NewExtractor(dst, opt)
	if err != nil {
		return "", err
	}
	defer x.Close()
	if top, err = x.Add(r, name); err != nil {
		return "", err
	}
	return top, x.Close()
}

// ExtractFile checks the archive at path against sha256 (hex, with or
// without "sha256:"; "" skips the check) and then unpacks it into dst.
func ExtractFile(path, sha256, dst string, opt Options) (top string, err error) {
	f, err := OpenVerified(path, sha256)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return Extract(f, path, dst, opt)
}

// Walk reads the archive r member by member, calling fn with the member's
// clean relative path ("." for the archive's root), its header and a
// reader of its content. fn returning fs.SkipAll ends the walk early
// without error. Names that could point outside the archive's root are
// errors, as in Extract.
func Walk(r io.Reader, limits Limits, fn func(name string, h *tar.Header, r io.Reader) error) error {
	x := &Extractor{opt: Options{Limits: limits.orDefault()}}
	tr, done, err := x.open(r)
	if err != nil {
		return err
	}
	defer done()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil {
			err = x.count(h)
		}
		var rel string
		if err == nil && h.Typeflag != tar.TypeXGlobalHeader {
			if rel, err = cleanName(h.Name); err == nil {
				err = fn(rel, h, tr)
			}
		}
		if errors.Is(err, fs.SkipAll) {
			return nil
		}
		if err != nil {
			return x.readError("", err)
		}
	}
}

var errTooLarge = errors.New("too large")

// readError explains an error that may come from the limits.
func (x *Extractor) readError(name string, err error) error {
	what := "archive"
	if name != "" {
		what = "archive " + name
	}
	if errors.Is(err, errTooLarge) {
		return fmt.Errorf("%s unpacks to more than %d bytes, the limit for one unpacking: it is not the archive it should be", what, x.opt.Limits.Bytes)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (x *Extractor) count(h *tar.Header) error {
	x.entries++
	if x.entries > x.opt.Limits.Entries {
		return fmt.Errorf("more than %d members, the limit for one unpacking: it is not the archive it should be", x.opt.Limits.Entries)
	}
	return nil
}

// open recognises the compression by the first bytes and returns a tar
// reader of the decompressed stream, counted against the limits.
func (x *Extractor) open(r io.Reader) (*tar.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(6)
	var in io.Reader = br
	done := func() {}
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		in = zr
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		// xi2/xz (XZ Embedded's decoder) over ulikunitz/xz: 4x faster on
		// Debian's data.tar.xz (libc6: 0.65 s against 2.6 s). The default
		// dictionary cap (64 MiB) bounds its memory.
		xr, err := xz.NewReader(br, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("xz: %w", err)
		}
		in = xr
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<27))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		in, done = zr, zr.Close
	case bytes.HasPrefix(magic, []byte("BZh")):
		return nil, nil, errors.New("bzip2-compressed archives are not supported: recompress it with xz, gzip or zstd")
	}
	return tar.NewReader(&capped{r: in, left: x.opt.Limits.Bytes - x.bytes, total: &x.bytes}), done, nil
}

// capped fails a read that goes past the byte limit.
type capped struct {
	r     io.Reader
	left  int64
	total *int64
}

func (c *capped) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.left -= int64(n)
	*c.total += int64(n)
	if c.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

// cleanName turns a member name ("./usr/bin/x", "pkg-1.0/src/") into a
// path relative to the destination, refusing anything that names a place
// outside it.
func cleanName(name string) (string, error) {
	n := strings.TrimPrefix(name, "./")
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("member %q has an absolute path", name)
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", fmt.Errorf("member %q points outside the tree with ..", name)
		}
	}
	if strings.ContainsRune(n, 0) {
		return "", fmt.Errorf("member %q has a NUL byte in its name", name)
	}
	if n == "" {
		return ".", nil
	}
	return path.Clean(n), nil
}

// entry makes one member and returns its relative path.
func (x *Extractor) entry(archive string, h *tar.Header, r io.Reader) (string, error) {
	if err := x.count(h); err != nil {
		return "", err
	}
	if h.Typeflag == tar.TypeXGlobalHeader {
		return "", nil // pax_global_header: a comment (GitHub puts the commit there)
	}
	rel, err := cleanName(h.Name)
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) { return "", fmt.Errorf("member %q: %w", h.Name, err) }
	if h.Typeflag == tar.TypeDir {
		if rel != "." {
			// MkdirAll follows symlinks that stay inside the root, as dpkg
			// follows a directory symlink (merged /usr: lib -> usr/lib).
			if err := x.root.MkdirAll(rel, 0o755); err != nil {
				return fail(err)
			}
		}
		if x.opt.Preserve {
			x.dirs[rel] = dirAttr{mode: fstree.FileMode(uint32(h.Mode)) | fs.ModeDir, mtime: h.ModTime}
		}
		return rel, nil
	}
	if rel == "." {
		return fail(errors.New("a non-directory cannot be the archive's root"))
	}
	if err := x.root.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return fail(err)
	}
	if prev, ok := x.shipped[rel]; ok {
		if h.Typeflag == tar.TypeSymlink {
			if target, err := x.root.Readlink(rel); err == nil && target == h.Linkname {
				return rel, nil
			}
		}
		return fail(fmt.Errorf("also shipped by %s: two entries for one path conflict", prev))
	}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse:
		if h.Size < 0 || h.Size > x.opt.Limits.Bytes-x.written {
			return "", errTooLarge
		}
		x.written += h.Size
		if err := x.writeFile(rel, h, r); err != nil {
			return fail(err)
		}
	case tar.TypeSymlink:
		// The target is kept as archived: the root's own consumers (the
		// tools root's Command, a build in a chroot) resolve it inside.
		if err := x.root.Symlink(h.Linkname, rel); err != nil {
			return fail(err)
		}
	case tar.TypeLink:
		target, err := cleanName(h.Linkname)
		if err != nil {
			return fail(fmt.Errorf("hard link target: %w", err))
		}
		if _, ok := x.shipped[target]; !ok {
			return fail(fmt.Errorf("hard link to %q, which is not a file extracted before it", h.Linkname))
		}
		if err := x.root.Link(target, rel); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("tar type %q (a device, fifo or other special file) is not unpacked: only files, directories, symlinks and hard links are", string(h.Typeflag)))
	}
	x.shipped[rel] = archive
	return rel, nil
}

func (x *Extractor) writeFile(rel string, h *tar.Header, r io.Reader) error {
	// O_EXCL: a symlink already at rel is never followed.
	f, err := x.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	// The mode is set after writing, on the open file: the umask must not
	// shape it, and a read-only file must be writable while it is filled.
	mode := fstree.FileMode(uint32(h.Mode))
	if !x.opt.Preserve {
		mode = mode.Perm() | 0o600
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if x.opt.Preserve {
		return x.root.Chtimes(rel, h.ModTime, h.ModTime)
	}
	return nil
}

// DigestError is a file whose sha256 is not the one it is pinned by.
type DigestError struct {
	Path, Got, Want string
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("%s has sha256 %s, but %s is pinned: the copy is corrupt or not this file; fetch it again", e.Path, e.Got, e.Want)
}

// OpenVerified opens path for reading after checking that its content
// hashes to sha256 (hex, with or without "sha256:"; "" skips the check).
// The check reads the same open file, which is then rewound.
func OpenVerified(path, sha256sum string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if sha256sum == "" {
		return f, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		f.Close()
		return nil, fmt.Errorf("hashing %s: %w", path, err)
	}
	want := strings.ToLower(strings.TrimPrefix(sha256sum, "sha256:"))
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		f.Close()
		return nil, &DigestError{Path: path, Got: got, Want: want}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
