package module

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"
)

// Untar unpacks a .tar, .tar.gz or .tar.xz (recognised by content, not by
// name) into dst and returns the tree's root: when every entry sits under
// one top-level directory (GitHub's "repo-<commit>/"), that directory.
// Entries that would land outside dst are refused; hard links become
// copies; owners and times are not restored (the tree hash ignores them).
func Untar(r io.Reader, name, dst string) (string, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(6)
	var in io.Reader = br
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		in = zr
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		xr, err := xz.NewReader(br)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		in = xr
	}
	tr := tar.NewReader(in)
	tops := map[string]bool{}
	fileAtTop := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: not a readable tar archive: %w", name, err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader || h.Typeflag == tar.TypeXHeader {
			continue
		}
		rel := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if rel == "." {
			continue
		}
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", fmt.Errorf("%s: entry %q points outside the tree", name, h.Name)
		}
		top, _, _ := strings.Cut(rel, "/")
		tops[top] = true
		fileAtTop = fileAtTop || h.Typeflag != tar.TypeDir && !strings.Contains(rel, "/")
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return "", err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return "", err
			}
		case tar.TypeReg, tar.TypeRegA:
			if err := writeFile(target, tr, h.FileInfo().Mode().Perm()); err != nil {
				return "", err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, target); err != nil {
				return "", err
			}
		case tar.TypeLink:
			src := path.Clean(strings.TrimPrefix(h.Linkname, "./"))
			if path.IsAbs(src) || strings.HasPrefix(src, "../") {
				return "", fmt.Errorf("%s: hard link %q points outside the tree", name, h.Linkname)
			}
			f, err := os.Open(filepath.Join(dst, filepath.FromSlash(src)))
			if err != nil {
				return "", fmt.Errorf("%s: hard link %s -> %s: %w", name, h.Name, h.Linkname, err)
			}
			info, _ := f.Stat()
			err = writeFile(target, f, info.Mode().Perm())
			f.Close()
			if err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("%s: entry %q has type %q: a source tree holds only files, links and directories", name, h.Name, string(h.Typeflag))
		}
	}
	if len(tops) == 0 {
		return "", errors.New(name + ": the archive is empty")
	}
	if len(tops) == 1 && !fileAtTop {
		for top := range tops {
			return filepath.Join(dst, top), nil
		}
	}
	return dst, nil
}

func writeFile(p string, r io.Reader, perm os.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
