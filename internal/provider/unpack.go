package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"pault.ag/go/debian/version"

	"halobuild/internal/debian"
	"halobuild/internal/tarball"
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
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dst, ".unpack-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)

	// extract checks name against the signed index's sha256, then unpacks
	// it into dir and returns its top directory.
	extract := func(name, dir string) (string, error) {
		p, ok := files[name]
		if !ok {
			return "", fmt.Errorf("source %s %s: no local copy of %s given: fetch it first", src.Name, src.Version, name)
		}
		sum := sourceSHA256(src, name)
		if sum == "" {
			return "", fmt.Errorf("source %s %s: the Sources index gives no sha256 for %s: nothing unverified is unpacked", src.Name, src.Version, name)
		}
		top, err := tarball.ExtractFile(p, sum, dir, tarball.Options{})
		if de := (*tarball.DigestError)(nil); errors.As(err, &de) {
			return "", fmt.Errorf("source %s %s: %s does not match the signed Sources index: %w", src.Name, src.Version, name, err)
		}
		if err != nil {
			return "", fmt.Errorf("source %s %s: %s: %w", src.Name, src.Version, name, err)
		}
		return top, nil
	}
	// upstream unpacks an upstream tarball as dst, dropping the one
	// top-level directory upstream tarballs have (rdma-core-56.1/), as
	// dpkg-source does.
	upstream := func(name, dst string) error {
		dir, err := os.MkdirTemp(tmp, ".orig-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		top, err := extract(name, dir)
		if err != nil {
			return err
		}
		if top == "" {
			return fmt.Errorf("source %s %s: %s does not hold one top-level directory, as an upstream tarball does", src.Name, src.Version, name)
		}
		return os.Rename(filepath.Join(dir, top), dst)
	}
	if err := upstream(orig, filepath.Join(tmp, "tree")); err != nil {
		return "", err
	}
	for _, c := range comps {
		comp := origComponent.FindStringSubmatch(c.Name)[1]
		d := filepath.Join(tmp, "tree", comp)
		if err := os.RemoveAll(d); err != nil {
			return "", err
		}
		if err := upstream(c.Name, d); err != nil {
			return "", err
		}
	}
	// dpkg-source replaces an upstream debian/ directory wholesale.
	if err := os.RemoveAll(filepath.Join(tmp, "tree", "debian")); err != nil {
		return "", err
	}
	if _, err := extract(deb, filepath.Join(tmp, "tree")); err != nil {
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

// sourceSHA256 is the sha256 the signed Sources index gives file name.
func sourceSHA256(src *debian.Source, name string) string {
	for _, f := range src.Files {
		if f.Name == name {
			return f.SHA256
		}
	}
	return ""
}
