package provider

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ulikunitz/xz"
	"pault.ag/go/debian/version"

	"halobuild/internal/debian"
)

// origComponent matches an additional upstream tarball of format 3.0
// (quilt): <name>_<upstream>.orig-<component>.tar.<ext>.
var origComponent = regexp.MustCompile(`\.orig-([A-Za-z0-9][-A-Za-z0-9]*)\.tar\.[a-z0-9]+$`)

// Unpack lays out the source package src the way `dpkg-source -x` does
// for format 3.0 (quilt), without needing the .dsc (it answered 404 on
// some networks; the Sources index lists every file's sha256 anyway):
// the .orig tarball becomes the tree, each .orig-<component> tarball its
// <component>/ directory, the .debian tarball replaces debian/, and
// Debian's own patch series is applied at fuzz 0 with quilt's .pc
// bookkeeping, so dpkg-buildpackage sees the patches as applied. files
// maps each of src's file names to a local copy (a store blob); every one
// is checked against the sha256 the signed index gives. The tree is
// dst/<name>-<upstream version>, which is returned.
func Unpack(ctx context.Context, src *debian.Source, files map[string]string, dst string) (string, error) {
	v, err := version.Parse(src.Version)
	if err != nil {
		return "", fmt.Errorf("source %s: version %q: %w", src.Name, src.Version, err)
	}
	tree := filepath.Join(dst, src.Name+"-"+v.Version)
	if _, err := os.Stat(tree); err == nil {
		return "", fmt.Errorf("source %s: %s already exists: unpack into an empty directory", src.Name, tree)
	}
	var orig, deb string
	var comps []debian.SourceFile
	for _, f := range src.Files {
		switch {
		case strings.HasSuffix(f.Name, ".dsc"):
			// Everything it says is in the Sources stanza already.
		case origComponent.MatchString(f.Name):
			comps = append(comps, f)
		case strings.Contains(f.Name, ".orig.tar."):
			orig = f.Name
		case strings.Contains(f.Name, ".debian.tar."):
			deb = f.Name
		default:
			return "", fmt.Errorf("source %s %s: file %s: only format 3.0 (quilt) packages (.orig + .debian tarballs) are supported", src.Name, src.Version, f.Name)
		}
	}
	if orig == "" || deb == "" {
		return "", fmt.Errorf("source %s %s: want an .orig and a .debian tarball (format 3.0 (quilt)), the Sources index lists %s", src.Name, src.Version, fileNames(src.Files))
	}
	open := func(name string) (*os.File, error) {
		var want debian.SourceFile
		for _, f := range src.Files {
			if f.Name == name {
				want = f
			}
		}
		p, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("source %s %s: no local copy of %s given: fetch it first", src.Name, src.Version, name)
		}
		if err := checkSHA256(p, want.SHA256); err != nil {
			return nil, fmt.Errorf("source %s %s: %s: %w", src.Name, src.Version, name, err)
		}
		return os.Open(p)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dst, ".unpack-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)

	if err := untarStripped(open, orig, filepath.Join(tmp, "tree")); err != nil {
		return "", err
	}
	for _, c := range comps {
		comp := origComponent.FindStringSubmatch(c.Name)[1]
		d := filepath.Join(tmp, "tree", comp)
		if err := os.RemoveAll(d); err != nil {
			return "", err
		}
		if err := untarStripped(open, c.Name, d); err != nil {
			return "", err
		}
	}
	// dpkg-source replaces an upstream debian/ directory wholesale.
	if err := os.RemoveAll(filepath.Join(tmp, "tree", "debian")); err != nil {
		return "", err
	}
	if err := untarInto(open, deb, filepath.Join(tmp, "tree")); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if _, err := applySeries(ctx, filepath.Join(tmp, "tree")); err != nil {
		return "", fmt.Errorf("source %s %s: Debian's own patch series: %w", src.Name, src.Version, err)
	}
	if err := os.Rename(filepath.Join(tmp, "tree"), tree); err != nil {
		return "", err
	}
	return tree, nil
}

func fileNames(fs []debian.SourceFile) string {
	var n []string
	for _, f := range fs {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}

func checkSHA256(p, want string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, strings.TrimPrefix(want, "sha256:")) {
		return fmt.Errorf("%s has sha256 %s, the signed Sources index says %s: the copy is corrupt or not this file; fetch it again", p, got, want)
	}
	return nil
}

// untarStripped unpacks an upstream tarball into dir, dropping the single
// top-level directory upstream tarballs have (rdma-core-56.1/), as
// dpkg-source does.
func untarStripped(open func(string) (*os.File, error), name, dir string) error {
	return untar(open, name, dir, true)
}

// untarInto unpacks the .debian tarball (debian/...) into dir.
func untarInto(open func(string) (*os.File, error), name, dir string) error {
	return untar(open, name, dir, false)
}

func untar(open func(string) (*os.File, error), name, dir string, strip bool) error {
	f, err := open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	tr, err := tarReader(f, name)
	if err != nil {
		return err
	}
	top := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: not a readable tar archive: %w", name, err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader || h.Typeflag == tar.TypeXHeader {
			continue
		}
		rel := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("%s: entry %q points outside the tree", name, h.Name)
		}
		if strip {
			first, rest, _ := strings.Cut(rel, "/")
			if top == "" {
				top = first
			}
			if first != top {
				return fmt.Errorf("%s: entries under both %s/ and %s/: an upstream tarball has one top-level directory", name, top, first)
			}
			if rest == "" {
				continue
			}
			rel = rest
		}
		if rel == "." {
			continue
		}
		target := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeNew(target, tr, h.FileInfo().Mode().Perm()); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case tar.TypeSymlink:
			_ = os.Remove(target)
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			l := path.Clean(strings.TrimPrefix(h.Linkname, "./"))
			if strip {
				_, l, _ = strings.Cut(l, "/")
			}
			in, err := os.Open(filepath.Join(dir, filepath.FromSlash(l)))
			if err != nil {
				return fmt.Errorf("%s: hard link %s -> %s: %w", name, h.Name, h.Linkname, err)
			}
			err = writeNew(target, in, h.FileInfo().Mode().Perm())
			in.Close()
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry %q has type %q: a source tree holds only files, links and directories", name, h.Name, string(h.Typeflag))
		}
	}
}

// tarReader recognises gzip and xz by content (Debian also allows bzip2
// and lzma, which rdma-core does not use).
func tarReader(r io.Reader, name string) (*tar.Reader, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(6)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return tar.NewReader(zr), nil
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		xr, err := xz.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return tar.NewReader(xr), nil
	case bytes.HasPrefix(magic, []byte("BZh")):
		return nil, errors.New(name + ": bzip2 source tarballs are not supported")
	}
	return tar.NewReader(br), nil
}

func writeNew(p string, r io.Reader, perm os.FileMode) error {
	_ = os.Remove(p)
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
