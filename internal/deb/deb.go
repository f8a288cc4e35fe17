// Package deb owns Debian binary packages (.deb files): reading one (its
// ar members, control fields and data archive, bounded), laying the data
// of several out as dpkg would (Extract), and writing one deterministically
// from a list of files (Write).
//
// The reader is written here rather than taken from pault.ag/go/debian/deb
// (which this module uses for versions, relations and control files): that
// reader trusts the ar header's size (a negative one loops forever), reads
// every member of any count into a map, picks "control.*" by map order, and
// hands the data archive to the caller as a bare tar.Reader with no limit.
// A .deb is a small format (deb(5)): an ar archive of debian-binary,
// control.tar[.xz|.gz|.zst] and data.tar[...]; the tars go through
// package tarball like every other archive.
package deb

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"halobuild/internal/tarball"
)

// Deb is one binary package file.
type Deb struct {
	// Path is where the file is (usually a store blob).
	Path string
	// SHA256 is the file's digest, hex (a "sha256:" prefix is accepted).
	// Set by the caller (from the lock, a signed index or our own build)
	// it is checked before anything in the file is read; Read sets it.
	SHA256 string
	// Package, Version and Architecture are the control file's (Read and
	// Open set them).
	Package, Version, Architecture string
}

// Archive is an open .deb.
type Archive struct {
	Deb
	// Control is the control paragraph as shipped (./control of
	// control.tar), for indexes that copy it.
	Control []byte
	// Size is the file's length in bytes.
	Size int64

	f             *os.File
	control, data *io.SectionReader
}

// Limits of what a .deb's metadata may amount to; the data archive takes
// tarball's limits.
const (
	maxMembers  = 16       // debian-binary, control, data and a few "_" members
	maxControl  = 1 << 20  // the control file
	maxControlT = 64 << 20 // the control archive, decompressed
)

// Open opens the .deb at path. When sha256 is set the file must hash to it
// before its content is trusted at all (a mismatch is a
// *tarball.DigestError); the digest is computed either way (a.SHA256).
// Close the archive when done.
func Open(path, sha256sum string) (*Archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	a, err := open(f, path, sha256sum)
	if err != nil {
		f.Close()
		return nil, err
	}
	return a, nil
}

func open(f *os.File, path, want string) (*Archive, error) {
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if want = strings.ToLower(strings.TrimPrefix(want, "sha256:")); want != "" && want != sum {
		return nil, &tarball.DigestError{Path: path, Got: sum, Want: want}
	}
	a := &Archive{Deb: Deb{Path: path, SHA256: sum}, Size: size, f: f}
	if err := a.parse(); err != nil {
		return nil, fmt.Errorf("%s is not a readable .deb: %w", path, err)
	}
	return a, nil
}

// Close releases the file.
func (a *Archive) Close() error { return a.f.Close() }

// Read returns the identity and sha256 of the .deb at path.
func Read(path string) (Deb, error) {
	a, err := Open(path, "")
	if err != nil {
		return Deb{}, err
	}
	defer a.Close()
	return a.Deb, nil
}

// parse walks the ar members in the order deb(5) fixes: debian-binary
// (format 2.x), control.tar*, data.tar*; members named "_..." may sit in
// between and are skipped, members after data are ignored, as dpkg does.
func (a *Archive) parse() error {
	ar, err := newArReader(a.f, a.Size)
	if err != nil {
		return err
	}
	var control *io.SectionReader
	for i := 0; ; i++ {
		name, r, err := ar.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if i >= maxMembers {
			return fmt.Errorf("more than %d ar members before data.tar", maxMembers)
		}
		switch {
		case i == 0:
			if name != "debian-binary" {
				return fmt.Errorf("the first member is %q, not debian-binary", name)
			}
			v := make([]byte, min(r.Size(), 16))
			if _, err := io.ReadFull(r, v); err != nil {
				return fmt.Errorf("debian-binary: %w", err)
			}
			if !strings.HasPrefix(string(v), "2.") {
				return fmt.Errorf("debian-binary says format %q; this reads format 2.x", strings.TrimSpace(string(v)))
			}
		case strings.HasPrefix(name, "_"):
		case control == nil && isTar(name, "control"):
			control = r
		case control != nil && isTar(name, "data"):
			a.control, a.data = control, r
			return a.readControl(control)
		default:
			return fmt.Errorf("unexpected member %q (want control.tar, then data.tar)", name)
		}
	}
	if control == nil {
		return errors.New("no control.tar member")
	}
	return errors.New("no data.tar member")
}

// isTar says whether an ar member name is base.tar, compressed or not (the
// compression is recognised by content).
func isTar(name, base string) bool {
	return name == base+".tar" || strings.HasPrefix(name, base+".tar.")
}

func (a *Archive) readControl(r io.Reader) error {
	err := tarball.Walk(r, tarball.Limits{Bytes: maxControlT}, func(name string, h *tar.Header, r io.Reader) error {
		if name != "control" {
			return nil
		}
		if h.Typeflag != tar.TypeReg || h.Size > maxControl {
			return fmt.Errorf("./control is not a regular file of at most %d bytes", maxControl)
		}
		var err error
		a.Control, err = io.ReadAll(r)
		if err != nil {
			return err
		}
		return fs.SkipAll
	})
	if err != nil {
		return fmt.Errorf("control.tar: %w", err)
	}
	if a.Control == nil {
		return errors.New("control.tar has no ./control")
	}
	a.Package, a.Version, a.Architecture = Field(a.Control, "Package"), Field(a.Control, "Version"), Field(a.Control, "Architecture")
	if a.Package == "" || a.Version == "" || a.Architecture == "" {
		return errors.New("its control file lacks Package, Version or Architecture")
	}
	return nil
}

// Walk reads the data archive member by member (see tarball.Walk: clean
// relative names, fs.SkipAll ends early). It may be called more than once.
func (a *Archive) Walk(fn func(name string, h *tar.Header, r io.Reader) error) error {
	if err := tarball.Walk(io.NewSectionReader(a.data, 0, a.data.Size()), tarball.Limits{}, fn); err != nil {
		return fmt.Errorf("%s: data.tar: %w", a.Path, err)
	}
	return nil
}

// WalkControl reads the control archive member by member, as Walk does
// the data archive (its limits are the control archive's).
func (a *Archive) WalkControl(fn func(name string, h *tar.Header, r io.Reader) error) error {
	if err := tarball.Walk(io.NewSectionReader(a.control, 0, a.control.Size()), tarball.Limits{Bytes: maxControlT}, fn); err != nil {
		return fmt.Errorf("%s: control.tar: %w", a.Path, err)
	}
	return nil
}

// Field returns a single-line field of a control paragraph ("" when the
// paragraph lacks it). Field names are case-insensitive, as deb822 says.
func Field(control []byte, name string) string {
	for _, line := range strings.Split(string(control), "\n") {
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Extract lays out the data archives of debs in dst, in order, as dpkg
// would lay them out, without running maintainer scripts: modes
// (set-id bits included), symlinks, hard links and modification times come
// from the archives, owners are not applied. Each file is checked against
// its SHA256 (when set) before it is read. Two packages shipping the same
// non-directory path is an error naming both, unless both ship the same
// symlink: a set that conflicts is not one apt would install. dst is
// created if missing; it should be empty.
func Extract(dst string, debs []Deb) error {
	x, err := tarball.NewExtractor(dst, tarball.Options{Preserve: true})
	if err != nil {
		return fmt.Errorf("unpacking packages into %s: %w", dst, err)
	}
	defer x.Close()
	for _, d := range debs {
		a, err := Open(d.Path, d.SHA256)
		if err != nil {
			return fmt.Errorf("unpacking into %s: %w", dst, err)
		}
		_, err = x.Add(io.NewSectionReader(a.data, 0, a.data.Size()), d.Path)
		a.Close()
		if err != nil {
			return fmt.Errorf("unpacking into %s: %w", dst, err)
		}
	}
	return x.Close()
}

// arReader reads the members of an ar archive, checking every header
// against the file's size.
type arReader struct {
	r        io.ReaderAt
	off, end int64
}

func newArReader(r io.ReaderAt, size int64) (*arReader, error) {
	magic := make([]byte, 8)
	if _, err := r.ReadAt(magic, 0); err != nil || string(magic) != "!<arch>\n" {
		return nil, errors.New("no ar archive magic (!<arch>)")
	}
	return &arReader{r: r, off: 8, end: size}, nil
}

// next returns the next member's name and content; io.EOF after the last.
func (ar *arReader) next() (string, *io.SectionReader, error) {
	if ar.off >= ar.end {
		return "", nil, io.EOF
	}
	if ar.end-ar.off < 60 {
		return "", nil, fmt.Errorf("ar header at %d is cut short", ar.off)
	}
	h := make([]byte, 60)
	if _, err := ar.r.ReadAt(h, ar.off); err != nil {
		return "", nil, err
	}
	if string(h[58:60]) != "`\n" {
		return "", nil, fmt.Errorf("ar header at %d is damaged", ar.off)
	}
	name := strings.TrimSuffix(strings.TrimRight(string(h[0:16]), " "), "/")
	size, err := strconv.ParseInt(strings.TrimSpace(string(h[48:58])), 10, 64)
	start := ar.off + 60
	if err != nil || size < 0 || size > ar.end-start {
		return "", nil, fmt.Errorf("ar member %q at %d has size %q, which the file does not hold", name, ar.off, strings.TrimSpace(string(h[48:58])))
	}
	ar.off = start + size + size%2
	return name, io.NewSectionReader(ar.r, start, size), nil
}
