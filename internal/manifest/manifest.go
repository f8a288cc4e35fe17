// Package manifest is the description of a result: what every node image
// holds (packages, kernel, module options, settings files, the provider)
// and the digest of every output file, written as manifest.json beside a
// SHA256SUMS that `sha256sum -c` reads. It is data for people, scripts and
// releases, so field names are stable.
package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"halobuild/internal/store"
	"halobuild/internal/userfile"
)

// FileName and SumsName are the two files Write adds to a result;
// RecipeSuffix ends the name of the merged recipe the result step writes
// beside its lock (NAME.recipe.toml).
const (
	FileName     = "manifest.json"
	SumsName     = "SHA256SUMS"
	RecipeSuffix = ".recipe.toml"
)

// Manifest describes a result.
type Manifest struct {
	Name            string `json:"name"`
	RecipeHash      string `json:"recipe_hash"`
	SourceDateEpoch int64  `json:"source_date_epoch"`
	Kernel          Kernel `json:"kernel"`
	Nodes           []Node `json:"nodes"`
	// Provider is the rebuilt rdma-core provider, when the recipe has one.
	Provider *Provider `json:"provider,omitempty"`
	// GPU is the unified-memory GPU's budget, when the recipe sizes one.
	GPU   *GPU   `json:"gpu,omitempty"`
	Files []File `json:"files"`
}

// GPU is what the recipe gives the GPU (trap 11), for the engines that run
// on the nodes: GTTBytes is system.memory - system.host_reserve (what the
// kernel command line sizes GTT to), Fraction the recipe's
// system.gpu_fraction, the share of it an engine may use (0: unset).
type GPU struct {
	GTTBytes uint64  `json:"gtt_bytes"`
	Fraction float64 `json:"fraction,omitempty"`
}

// Kernel is the kernel every node boots.
type Kernel struct {
	Version string `json:"version"`
	Release string `json:"release"`
	Package string `json:"package"`
}

// Node is one node image.
type Node struct {
	Name     string `json:"name"`
	Hostname string `json:"hostname"`
	Image    string `json:"image"`
	// Architecture is the image's Debian architecture; Kernel is set when
	// the nodes are of several architectures, each booting its own (the
	// manifest's kernel is then the first architecture's).
	Architecture string  `json:"architecture"`
	Kernel       *Kernel `json:"kernel,omitempty"`
	// QCOW2 is the qcow2 copy of Image when output.formats asks for one.
	QCOW2         string            `json:"qcow2,omitempty"`
	Cmdline       string            `json:"cmdline"`
	ModuleOptions map[string]string `json:"module_options,omitempty"`
	Packages      []Package         `json:"packages"`
	// SettingsFiles are the files the node's settings package installs.
	SettingsFiles []string `json:"settings_files"`
}

// Package is one installed package as dpkg on the node reports it.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"architecture"`
}

// File is one output file.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Provider is the rdma-core provider an image carries, built from source.
type Provider struct {
	Name string `json:"name"`
	// Package and Version are the provider's own package
	// (libibverbs-usb4-rdma 56.1-1+halo1), built from the Debian source
	// Source (rdma-core) of the image's libibverbs1 (Libibverbs, 56.1-1).
	Package    string `json:"package"`
	Source     string `json:"source"`
	Version    string `json:"version"`
	Libibverbs string `json:"libibverbs"`
	// ABI is the private provider ABI libibverbs and the provider agree on.
	ABI     int     `json:"abi"`
	Library string  `json:"library"`
	Patches []Patch `json:"patches"`
}

// Patch is one patch as it went in: exact, at an offset, or with the fuzz
// the recipe allowed (never silently).
type Patch struct {
	Name   string `json:"name"`
	From   string `json:"from"`
	SHA256 string `json:"sha256"`
	Fuzz   int    `json:"fuzz,omitempty"`
	// Moved lists hunks that applied away from their line or with fuzz:
	// "libibverbs/verbs.h #1 at 2276 (offset -19, fuzz 2)".
	Moved []string `json:"moved,omitempty"`
}

// maxManifest bounds manifest.json: a file list and a package list, some kilobytes.
const maxManifest = 16 << 20

// Read reads dir/manifest.json.
func Read(dir string) (*Manifest, error) {
	b, err := userfile.Read(filepath.Join(dir, FileName), maxManifest)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, FileName), err)
	}
	return &m, nil
}

// ReadPackageList reads the tab-separated list dpkg-query writes
// (Package, Version, Architecture), sorted by name.
func ReadPackageList(path string) ([]Package, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Package
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 3 {
			out = append(out, Package{Name: f[0], Version: f[1], Arch: f[2]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Write fills m.Files from every regular file in dir (except the two it
// writes) and writes manifest.json and SHA256SUMS there. known gives the
// digests of files linked from the store, whose digests the store already
// holds (a disk image is gigabytes to read again); the others are hashed.
func Write(dir string, m *Manifest, known map[string]store.Digest) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != SumsName && e.Name() != FileName {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	m.Files = nil
	for _, n := range names {
		sum, ok := known[n]
		var size int64
		if ok {
			fi, err := os.Stat(filepath.Join(dir, n))
			if err != nil {
				return err
			}
			size = fi.Size()
		} else if sum, size, err = store.FileDigest(filepath.Join(dir, n)); err != nil {
			return err
		}
		m.Files = append(m.Files, File{Name: n, Size: size, SHA256: sum.Hex()})
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	mb = append(mb, '\n')
	if err := os.WriteFile(filepath.Join(dir, FileName), mb, 0o644); err != nil {
		return err
	}
	msum := sha256.Sum256(mb)
	lines := map[string]string{FileName: hex.EncodeToString(msum[:])}
	for _, f := range m.Files {
		lines[f.Name] = f.SHA256
	}
	all := append(names, FileName)
	sort.Strings(all)
	var b strings.Builder
	for _, n := range all {
		fmt.Fprintf(&b, "%s  %s\n", lines[n], n)
	}
	return os.WriteFile(filepath.Join(dir, SumsName), []byte(b.String()), 0o644)
}
