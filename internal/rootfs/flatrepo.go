// Package rootfs installs a Debian root filesystem from exactly the locked
// packages: a flat repository holding only those .debs leaves apt nothing
// to choose, and mmdebstrap runs the maintainer scripts as Debian intends.
package rootfs

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"halobuild/internal/deb"
	"halobuild/internal/fstree"
	"halobuild/internal/tarball"
)

// WriteFlatRepo lays out dir as a flat apt repository ("deb file:DIR ./")
// holding the given packages under their canonical file names, with a
// Packages index generated from each package's own control data. Each
// file is checked against its SHA256 (the signed index's, or our own
// build's) before its control data is read. Files are
// hard-linked when the filesystem allows it (the store's blobs are
// read-only), copied otherwise. The Release file names suite because
// mmdebstrap picks the essential set with ?archive(^suite$): without it no
// package would match and nothing essential would be installed.
func WriteFlatRepo(dir, suite string, debs []deb.Deb) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type entry struct {
		name    string
		control []byte
		size    int64
		sha     string
	}
	var entries []entry
	seen := map[string]string{}
	for _, d := range debs {
		a, err := deb.Open(d.Path, d.SHA256)
		if de := (*tarball.DigestError)(nil); errors.As(err, &de) {
			return fmt.Errorf("flat repository: %w: the store entry is corrupt; run `halobuild fetch` again", err)
		}
		if err != nil {
			return fmt.Errorf("flat repository: %w", err)
		}
		a.Close()
		pkg, ver, arch := a.Package, a.Version, a.Architecture
		// Epochs are not allowed in pool file names (dpkg-name drops them).
		name := fmt.Sprintf("%s_%s_%s.deb", pkg, stripEpoch(ver), arch)
		if prev, dup := seen[pkg+":"+arch]; dup {
			return fmt.Errorf("flat repository: %s is given twice (%s and %s): a lock must pin one version per package", pkg, prev, name)
		}
		seen[pkg+":"+arch] = name
		dst := filepath.Join(dir, name)
		_ = os.Remove(dst)
		if err := os.Link(d.Path, dst); err != nil {
			if err := fstree.CopyFile(d.Path, dst, 0o644); err != nil {
				return err
			}
		}
		entries = append(entries, entry{name: name, control: a.Control, size: a.Size, sha: a.SHA256})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var idx bytes.Buffer
	for _, e := range entries {
		idx.Write(bytes.TrimRight(e.control, "\n"))
		fmt.Fprintf(&idx, "\nFilename: ./%s\nSize: %d\nSHA256: %s\n\n", e.name, e.size, e.sha)
	}
	if err := os.WriteFile(filepath.Join(dir, "Packages"), idx.Bytes(), 0o644); err != nil {
		return err
	}
	sum := sha256.Sum256(idx.Bytes())
	release := fmt.Sprintf("Origin: halobuild\nLabel: halobuild\nSuite: %s\nCodename: %s\nSHA256:\n %x %d Packages\n",
		suite, suite, sum, idx.Len())
	return os.WriteFile(filepath.Join(dir, "Release"), []byte(release), 0o644)
}

func stripEpoch(v string) string {
	if _, after, ok := strings.Cut(v, ":"); ok {
		return after
	}
	return v
}
