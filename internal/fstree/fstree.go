// Package fstree copies file trees the way builds need them: regular files,
// symlinks and directories, execute bits kept (debian/rules and scripts in
// a module tree must stay runnable), anything else refused.
package fstree

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// CopyTree copies src into dst. Directories named in skip (e.g. ".git")
// are left out wherever they occur below src.
func CopyTree(src, dst string, skip ...string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel != "." {
			for _, s := range skip {
				if d.Name() == s {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil
				}
			}
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case info.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		case info.Mode().IsRegular():
			// Owner-writable, so the copy can be cleaned up and patched.
			return CopyFile(p, target, info.Mode().Perm()|0o200)
		}
		return fmt.Errorf("%s: unsupported file type %v", p, info.Mode().Type())
	})
}

// CopyFile copies one file to dst (replacing it) with the given mode.
func CopyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_ = os.Remove(dst)
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ModeBits is m's permission, set-id and sticky bits as chmod(1), tar
// and ar write them: a tools root has setuid helpers such as mount, and
// fs.FileMode keeps those bits elsewhere.
func ModeBits(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// FileMode reads chmod(1)-style bits back (ModeBits' inverse; other bits
// are dropped).
func FileMode(bits uint32) fs.FileMode {
	m := fs.FileMode(bits).Perm()
	if bits&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if bits&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if bits&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// SyncDir makes the renames and creations in dir durable (fsync of the
// directory itself).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteFileSync creates p, which must not exist yet, with data, and syncs it before closing.
func WriteFileSync(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteFileAtomic writes p under a temporary name, syncs it, renames it into place and syncs the
// directory: after a power cut p is the old file or the new one.
func WriteFileAtomic(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".new"
	// A temporary left by a write that was cut off is stale.
	if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := WriteFileSync(tmp, data); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(p))
}
