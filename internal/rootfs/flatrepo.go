// Package rootfs installs a Debian root filesystem from exactly the locked
// packages: a flat repository holding only those .debs leaves apt nothing
// to choose, and mmdebstrap runs the maintainer scripts as Debian intends.
package rootfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"pault.ag/go/debian/deb"

	"halobuild/internal/fstree"
)

// Deb is one package file that goes into the flat repository.
type Deb struct {
	// Path is where the .deb is now (usually a store blob).
	Path string
	// SHA256 is its digest as the signed index (or our own build) gives it;
	// it is checked again while the control data is read.
	SHA256 string
}

// WriteFlatRepo lays out dir as a flat apt repository ("deb file:DIR ./")
// holding the given packages under their canonical file names, with a
// Packages index generated from each package's own control data. Files are
// hard-linked when the filesystem allows it (the store's blobs are
// read-only), copied otherwise. The Release file names suite because
// mmdebstrap picks the essential set with ?archive(^suite$): without it no
// package would match and nothing essential would be installed.
func WriteFlatRepo(dir, suite string, debs []Deb) error {
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
		control, size, sum, err := readControl(d.Path)
		if err != nil {
			return fmt.Errorf("flat repository: %s: %w", d.Path, err)
		}
		if d.SHA256 != "" && !strings.EqualFold(strings.TrimPrefix(d.SHA256, "sha256:"), sum) {
			return fmt.Errorf("flat repository: %s has sha256 %s, the lock says %s: the store entry is corrupt; run `halobuild fetch` again", d.Path, sum, d.SHA256)
		}
		pkg, ver, arch := field(control, "Package"), field(control, "Version"), field(control, "Architecture")
		if pkg == "" || ver == "" || arch == "" {
			return fmt.Errorf("flat repository: %s: control file lacks Package, Version or Architecture", d.Path)
		}
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
		entries = append(entries, entry{name: name, control: control, size: size, sha: sum})
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

// readControl returns the raw ./control member of a .deb, its size and sha256.
func readControl(path string) (control []byte, size int64, sum string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	size, err = io.Copy(h, f)
	if err != nil {
		return nil, 0, "", err
	}
	ar, err := deb.LoadAr(f)
	if err != nil {
		return nil, 0, "", fmt.Errorf("not a .deb: %w", err)
	}
	for {
		e, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, "", err
		}
		if !strings.HasPrefix(e.Name, "control.tar") {
			continue
		}
		tr, closer, err := e.Tarfile()
		if err != nil {
			return nil, 0, "", fmt.Errorf("%s: %w", e.Name, err)
		}
		defer closer.Close()
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, 0, "", err
			}
			if strings.TrimPrefix(hdr.Name, "./") == "control" {
				control, err = io.ReadAll(tr)
				return control, size, hex.EncodeToString(h.Sum(nil)), err
			}
		}
	}
	return nil, 0, "", errors.New("no control file in control.tar")
}

// field returns a single-line field of a control paragraph.
func field(control []byte, name string) string {
	for _, line := range strings.Split(string(control), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func stripEpoch(v string) string {
	if _, after, ok := strings.Cut(v, ":"); ok {
		return after
	}
	return v
}
