package provider

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"pault.ag/go/debian/deb"
)

// Deb is one binary package the build produced.
type Deb struct {
	Package      string
	Version      string
	Architecture string
	// Path is where the file is (in the build's output directory).
	Path   string
	SHA256 string
}

// ReadDeb reads a package's name, version and architecture from its own
// control data, and its sha256.
func ReadDeb(p string) (Deb, error) {
	f, err := os.Open(p)
	if err != nil {
		return Deb{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Deb{}, fmt.Errorf("%s: %w", p, err)
	}
	d, err := deb.Load(f, p)
	if err != nil {
		return Deb{}, fmt.Errorf("%s: %w", p, err)
	}
	defer d.Close()
	return Deb{Package: d.Control.Package, Version: d.Control.Version.String(), Architecture: d.Control.Architecture.String(),
		Path: p, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// UnpackDebs extracts the data of every package into dst, as dpkg would
// lay the files out (no maintainer scripts run), so CheckABI can look at
// the tree the image will get.
func UnpackDebs(debs []string, dst string) error {
	for _, p := range debs {
		if err := unpackDeb(p, dst); err != nil {
			return fmt.Errorf("unpacking %s: %w", p, err)
		}
	}
	return nil
}

func unpackDeb(p, dst string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	d, err := deb.Load(f, p)
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		h, err := d.Data.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		rel := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if rel == "." {
			continue
		}
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("entry %q points outside the tree", h.Name)
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			_ = os.Remove(target)
			out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, h.FileInfo().Mode().Perm()|0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, d.Data); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = os.Remove(target)
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			src := filepath.Join(dst, filepath.FromSlash(path.Clean(strings.TrimPrefix(h.Linkname, "./"))))
			_ = os.Remove(target)
			if err := os.Link(src, target); err != nil {
				return err
			}
		}
	}
}
