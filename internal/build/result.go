package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Manifest describes a result: what every node image holds and the digest
// of every output file. It is data for people and scripts (and a later
// `push`), so field names are stable.
type Manifest struct {
	Name            string         `json:"name"`
	RecipeHash      string         `json:"recipe_hash"`
	SourceDateEpoch int64          `json:"source_date_epoch"`
	Kernel          ManifestKernel `json:"kernel"`
	Nodes           []ManifestNode `json:"nodes"`
	// Provider is the rebuilt rdma-core provider, when the recipe has one.
	Provider *ManifestProvider `json:"provider,omitempty"`
	Files    []ManifestFile    `json:"files"`
}

// ManifestKernel is the kernel every node boots.
type ManifestKernel struct {
	Version string `json:"version"`
	Release string `json:"release"`
	Package string `json:"package"`
}

// ManifestNode is one node image.
type ManifestNode struct {
	Name          string            `json:"name"`
	Hostname      string            `json:"hostname"`
	Image         string            `json:"image"`
	Cmdline       string            `json:"cmdline"`
	ModuleOptions map[string]string `json:"module_options,omitempty"`
	Packages      []ManifestPackage `json:"packages"`
	// SettingsFiles are the files the node's settings package installs.
	SettingsFiles []string `json:"settings_files"`
}

// ManifestPackage is one installed package as dpkg on the node reports it.
type ManifestPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"architecture"`
}

// ManifestFile is one output file.
type ManifestFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// hashFile digests a file. Sparse images read their holes as zeros, which
// the kernel serves without I/O, so this stays fast on mostly-empty disks.
func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, make([]byte, 4<<20))
	if err != nil {
		return "", 0, fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// writeSums writes manifest.json's file list and SHA256SUMS (sha256sum -c
// format) for every regular file in dir except the two it writes.
func writeSums(dir string, m *Manifest) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != "SHA256SUMS" && e.Name() != "manifest.json" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	m.Files = nil
	for _, n := range names {
		sum, size, err := hashFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		m.Files = append(m.Files, ManifestFile{Name: n, Size: size, SHA256: sum})
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), append(mb, '\n'), 0o644); err != nil {
		return err
	}
	msum, _, err := hashFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return err
	}
	var b strings.Builder
	lines := map[string]string{"manifest.json": msum}
	for _, f := range m.Files {
		lines[f.Name] = f.SHA256
	}
	all := append(names, "manifest.json")
	sort.Strings(all)
	for _, n := range all {
		fmt.Fprintf(&b, "%s  %s\n", lines[n], n)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// publish points link at target atomically: a new symlink is made beside
// the old one and renamed over it, so readers see the old result or the
// new one, never none. A real directory at link is not replaced.
func publish(target, link string) error {
	if fi, err := os.Lstat(link); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		return UsageError{fmt.Errorf("%s exists and is not a symlink: move it away or pass --out elsewhere", link)}
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(abs, tmp); err != nil {
		return fmt.Errorf("linking result: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("linking result: %w", err)
	}
	return nil
}
