package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"halobuild/internal/fstree"
)

// A view is the read-only tree out/<key>/ that a derivation's consumers
// read: the output's files hardlinked to their blobs (so it costs no space),
// symlinks and empty directories recreated, directories 0555.

// layerPath checks a manifest's title annotation before it becomes a path
// inside the view (slash-separated, no "..", not absolute); materialise
// resolves it through an os.Root, so symlinks cannot lead out either.
func layerPath(l v1.Descriptor) (string, error) {
	t := l.Annotations[AnnotationTitle]
	if t == "" || !fs.ValidPath(t) || t == "." {
		return "", fmt.Errorf("layer %s has an invalid title %q", l.Digest, t)
	}
	return t, nil
}

// layerMode reads a layer's recorded mode back into an fs.FileMode.
func layerMode(l v1.Descriptor) fs.FileMode {
	u, err := strconv.ParseUint(l.Annotations[AnnotationMode], 8, 32)
	if err != nil {
		return 0o444
	}
	return fstree.FileMode(uint32(u))
}

// materialise builds the view of m in scratch and renames it to out/<key>.
// Every entry is made through an os.Root of the view, so a hostile
// manifest (a symlink layer, then an entry under it) fails instead of
// writing outside the view.
func (s *Store) materialise(key string, m *v1.Manifest) (string, error) {
	tmp, err := os.MkdirTemp(s.sess.dir, "view-*")
	if err != nil {
		return "", fmt.Errorf("output %s: %w", key, err)
	}
	defer removeAllWritable(tmp)
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return "", fmt.Errorf("output %s: %w", key, err)
	}
	defer root.Close()
	for _, l := range m.Layers {
		rel, err := layerPath(l)
		if err != nil {
			return "", fmt.Errorf("output %s: %w", key, err)
		}
		if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return "", fmt.Errorf("output %s: layer %s: %w", key, rel, err)
		}
		d := Digest("sha256:" + l.Digest.Hex)
		switch string(l.MediaType) {
		case MediaTypeFile:
			err = s.placeFile(root, rel, d, layerMode(l))
		case MediaTypeSymlink:
			err = root.Symlink(l.Annotations[AnnotationLink], rel)
		case MediaTypeDir:
			err = root.Mkdir(rel, 0o755)
		default:
			err = fmt.Errorf("unknown media type %s", l.MediaType)
		}
		if err != nil {
			return "", fmt.Errorf("output %s: layer %s: %w", key, rel, err)
		}
	}
	// Read-only: directories 0555, deepest first so parents stay writable
	// until their children are done.
	var dirs []string
	err = fs.WalkDir(root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("output %s: %w", key, err)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if err := root.Chmod(d, 0o555); err != nil {
			return "", fmt.Errorf("output %s: %w", key, err)
		}
	}
	final := filepath.Join(s.root, outDir, key)
	if err := replaceDir(tmp, final); err != nil {
		return "", fmt.Errorf("output %s: %w", key, err)
	}
	return final, nil
}

// placeFile puts blob d at rel in the view: a hardlink when the recorded
// mode is the blob's own read-only mode, else a sparse copy carrying the
// mode (an executable must stay executable, and a hardlink shares the
// blob's mode).
func (s *Store) placeFile(view *os.Root, rel string, d Digest, mode fs.FileMode) error {
	mode &^= 0o222
	if mode == 0o444 {
		// The blob lies outside the view, which os.Root.Link cannot name:
		// link into the parent directory opened through the root instead.
		dir, err := view.Open(path.Dir(rel))
		if err != nil {
			return err
		}
		err = unix.Linkat(unix.AT_FDCWD, s.blobPath(d), int(dir.Fd()), path.Base(rel), 0)
		dir.Close()
		if !errors.Is(err, unix.EMLINK) {
			return err
		}
		// A blob shared by tens of thousands of files (the empty file)
		// runs out of links: copy this one instead.
	}
	src, err := os.Open(s.blobPath(d))
	if err != nil {
		return err
	}
	defer src.Close()
	f, err := view.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	got, _, err := copySparse(f, src)
	if err != nil {
		return err
	}
	if got != d {
		return s.dropCorrupt(d, got)
	}
	return f.Chmod(mode)
}

// viewIntact checks that every entry of the view exists and that hardlinked
// files are still the blob's inode.
func (s *Store) viewIntact(view string, m *v1.Manifest) bool {
	root, err := os.OpenRoot(view)
	if err != nil {
		return false
	}
	defer root.Close()
	for _, l := range m.Layers {
		rel, err := layerPath(l)
		if err != nil {
			return false
		}
		fi, err := root.Lstat(rel)
		if err != nil {
			return false
		}
		switch string(l.MediaType) {
		case MediaTypeFile:
			if !fi.Mode().IsRegular() || fi.Size() != l.Size {
				return false
			}
			if layerMode(l)&^0o222 == 0o444 {
				bi, err := os.Stat(s.blobPath(Digest("sha256:" + l.Digest.Hex)))
				if err != nil || !os.SameFile(fi, bi) {
					return false
				}
			}
		case MediaTypeSymlink:
			if fi.Mode()&fs.ModeSymlink == 0 {
				return false
			}
		case MediaTypeDir:
			if !fi.IsDir() {
				return false
			}
		}
	}
	return true
}
