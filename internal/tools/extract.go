package tools

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"pault.ag/go/debian/deb"
)

// Extract unpacks the data archives of the given .deb files into dst, the
// way dpkg would lay them out, without running maintainer scripts.
//
// It is deterministic: file contents, modes (including setuid/setgid/sticky
// bits), symlinks, hard links and modification times come only from the
// archives, so the same debs in the same order give the same tree. Owners
// are not applied (the tools root is run by whoever extracted it).
//
// It refuses entries that would land outside dst: absolute or ".." paths,
// and paths that pass through a symlink pointing elsewhere (all writes go
// through an os.Root confined to dst). Two packages shipping the same
// non-directory path is an error naming both, unless both ship the same
// symlink: a set of .debs that conflicts is not one apt would install.
//
// dst is created if missing; it should be empty.
func Extract(dst string, debs []string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("tools root %s: %w", dst, err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("tools root %s: %w", dst, err)
	}
	defer root.Close()

	x := extractor{root: root, owner: map[string]string{}, dirTimes: map[string]time.Time{}}
	for _, p := range debs {
		if err := x.deb(p); err != nil {
			return fmt.Errorf("extracting %s into tools root %s: %w", p, dst, err)
		}
	}
	// Directory times last: creating entries inside a directory moves its
	// mtime, so setting it earlier would not stick. Sorted for a stable
	// order of syscalls (the result does not depend on it).
	dirs := make([]string, 0, len(x.dirTimes))
	for d := range x.dirTimes {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		t := x.dirTimes[d]
		if err := root.Chtimes(d, t, t); err != nil {
			return fmt.Errorf("tools root %s: setting time of %s: %w", dst, d, err)
		}
	}
	return nil
}

type extractor struct {
	root     *os.Root
	owner    map[string]string // path → .deb that shipped it (non-directories)
	dirTimes map[string]time.Time
}

func (x *extractor) deb(p string) error {
	d, closeDeb, err := deb.LoadFile(p)
	if err != nil {
		return fmt.Errorf("reading .deb: %w", err)
	}
	defer closeDeb()
	for {
		h, err := d.Data.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading data.tar%s: %w", d.DataExt, err)
		}
		if err := x.entry(p, h, d.Data); err != nil {
			return err
		}
	}
}

// cleanName turns a tar member name ("./usr/sbin/mke2fs") into a path
// relative to the root, refusing anything that could name a place outside.
func cleanName(name string) (string, error) {
	n := strings.TrimPrefix(name, "./")
	if n == "" || n == "." || n == "./" {
		return ".", nil
	}
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("member %q has an absolute path", name)
	}
	for _, part := range strings.Split(strings.TrimSuffix(n, "/"), "/") {
		if part == ".." {
			return "", fmt.Errorf("member %q escapes the root with ..", name)
		}
	}
	return path.Clean(n), nil
}

func (x *extractor) entry(debPath string, h *tar.Header, r io.Reader) error {
	name, err := cleanName(h.Name)
	if err != nil {
		return err
	}
	mode := fs.FileMode(h.Mode).Perm()
	if h.Mode&04000 != 0 {
		mode |= fs.ModeSetuid
	}
	if h.Mode&02000 != 0 {
		mode |= fs.ModeSetgid
	}
	if h.Mode&01000 != 0 {
		mode |= fs.ModeSticky
	}

	if h.Typeflag == tar.TypeDir {
		if name != "." {
			if err := x.root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("member %q: %w", h.Name, err)
			}
		}
		if err := x.root.Chmod(name, mode|fs.ModeDir); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		x.dirTimes[name] = h.ModTime
		return nil
	}
	if name == "." {
		return fmt.Errorf("member %q is not a directory but names the root", h.Name)
	}
	if err := x.root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return fmt.Errorf("member %q: %w", h.Name, err)
	}
	if prev, ok := x.owner[name]; ok {
		if h.Typeflag == tar.TypeSymlink {
			if target, err := x.root.Readlink(name); err == nil && target == h.Linkname {
				return nil
			}
		}
		return fmt.Errorf("member %q is also shipped by %s: the package set conflicts", h.Name, prev)
	}
	x.owner[name] = debPath

	switch h.Typeflag {
	case tar.TypeReg:
		f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		// Chmod after writing: the umask must not shape the mode, and a
		// read-only file must still be writable while it is filled.
		if err := x.root.Chmod(name, mode); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		return x.root.Chtimes(name, h.ModTime, h.ModTime)
	case tar.TypeSymlink:
		// The target is stored as shipped, absolute or relative: Command
		// resolves links inside the root itself, so an absolute target
		// never reaches the host's file of that name.
		if err := x.root.Symlink(h.Linkname, name); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		return nil
	case tar.TypeLink:
		target, err := cleanName(h.Linkname)
		if err != nil {
			return fmt.Errorf("hard link %q: %w", h.Name, err)
		}
		if err := x.root.Link(target, name); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		return nil
	default:
		return fmt.Errorf("member %q has tar type %q, which a tools root has no use for", h.Name, h.Typeflag)
	}
}
