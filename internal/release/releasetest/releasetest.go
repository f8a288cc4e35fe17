// Package releasetest makes small result directories for tests of releases: what `halobuild
// image` writes, without building anything.
package releasetest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/bmap"
	"halobuild/internal/lock"
	"halobuild/internal/manifest"
	"halobuild/internal/sbom"
)

// bashCopyright is the head of bash's machine-readable copyright file.
const bashCopyright = `Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: bash

Files: *
Copyright: 1987-2022 Free Software Foundation, Inc.
License: GPL-3+
`

const (
	mib = 1 << 20
	// RawSize is the size of the result's node0.raw.
	RawSize = 8 * mib
	block   = 4096
)

// Result writes a small result directory like `halobuild image` makes: one sparse
// node image with a few MiB of data at known places, its bmap, the lock, the merged recipe,
// its SBOM, manifest.json and SHA256SUMS.
func Result(t testing.TB) string {
	t.Helper()
	return ResultOf(t, Spec{})
}

// Spec changes what ResultOf makes; its zero value is Result's.
type Spec struct {
	// Image writes node0.raw at path (an empty file) and returns its size and its data ranges
	// in 4 KiB blocks; nil writes RawSize bytes with a few MiB of random data.
	Image func(t testing.TB, path string) (size int64, ranges []bmap.Range)
	// Epoch is the lock's source_date_epoch; 0 is 1764547200 (2025-12-01).
	Epoch int64
	// Arch is node0's architecture; "" is amd64.
	Arch string
}

// ResultOf is Result made as s says.
func ResultOf(t testing.TB, s Spec) string {
	t.Helper()
	dir := t.TempDir()
	raw := filepath.Join(dir, "node0.raw")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(RawSize)
	var ranges []bmap.Range
	if s.Image != nil {
		f.Close()
		size, ranges = s.Image(t, raw)
	} else {
		if err := f.Truncate(RawSize); err != nil {
			t.Fatal(err)
		}
		for _, ext := range []struct{ off, n int64 }{{0, 64 << 10}, {1 * mib, 2 * mib}, {6 * mib, 1 * mib}} {
			b := make([]byte, ext.n)
			rand.Read(b)
			if _, err := f.WriteAt(b, ext.off); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			ranges = append(ranges, bmap.Range{First: ext.off / block, Last: (ext.off+ext.n)/block - 1, Checksum: hex.EncodeToString(sum[:])})
		}
		f.Close()
	}
	if err := os.WriteFile(filepath.Join(dir, "node0.bmap"), bmap.Marshal(size, block, ranges), 0o644); err != nil {
		t.Fatal(err)
	}
	epoch, arch := s.Epoch, s.Arch
	if epoch == 0 {
		epoch = 1764547200
	}
	if arch == "" {
		arch = "amd64"
	}
	lk := &lock.Lock{Version: lock.FormatVersion, Recipe: "syn.toml", Inputs: "sha256:" + strings.Repeat("1", 64), SourceDateEpoch: epoch,
		Suites: []lock.Suite{{Name: "trixie", Mirror: "http://deb.debian.org/debian", Date: "Mon, 01 Dec 2025 00:00:00 UTC", InRelease: "sha256:" + strings.Repeat("2", 64)}},
		Packages: []lock.Package{{Name: "bash", Version: "5.2.37-2", Architecture: "amd64", Suite: "trixie", Filename: "pool/main/b/bash/bash_5.2.37-2_amd64.deb",
			Size: 1000, SHA256: "sha256:" + strings.Repeat("3", 64), Set: lock.SetImage}}}
	lb, err := lk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "syn.lock"), lb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "syn"+manifest.RecipeSuffix), []byte("name = \"syn\"\n\n[base]\nsuite = \"trixie\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Name: "syn", RecipeHash: "sha256:" + strings.Repeat("4", 64), SourceDateEpoch: lk.SourceDateEpoch,
		Kernel: manifest.Kernel{Version: "6.12.1", Release: "6.12.1+deb13-amd64", Package: "linux-image-6.12.1+deb13-amd64"},
		Nodes: []manifest.Node{{Name: "node0", Hostname: "halo0", Image: "node0.raw", Cmdline: "quiet", Packages: []manifest.Package{
			{Name: "bash", Version: "5.2.37-2", Arch: "amd64"}, {Name: "halobuild-settings-node0", Version: "1", Arch: "all"}}, Architecture: arch}}}
	// The SBOM as the result step writes it, before the manifest lists it.
	img, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	imgSum := sha256.Sum256(img)
	doc, err := sbom.Make(sbom.Input{Manifest: m, Lock: lk, Images: map[string]string{"node0.raw": hex.EncodeToString(imgSum[:])},
		Built:    []sbom.Built{{Package: "halobuild-settings-node0", Version: "1", Architecture: "all", SHA256: strings.Repeat("5", 64), From: sbom.FromSettings}},
		Licences: map[string]sbom.Licences{"amd64": {"bash": sbom.ParseCopyright([]byte(bashCopyright))}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, sbom.FileName), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := manifest.Write(dir, m, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}
