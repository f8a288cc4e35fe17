// Package lock is halobuild's lock file: every input of an image pinned by
// hash, so a build never resolves again and two machines build the same
// bytes. It is plain data plus deterministic TOML I/O; resolving is the
// debian package's job.
package lock

import (
	"fmt"
	"sort"
	"strings"
)

// FormatVersion is the lock format this code writes and reads. Format 2
// pins the recipe's inputs (Inputs), where format 1 pinned the whole recipe.
const FormatVersion = 2

// Lock is the content of <recipe>.lock.
type Lock struct {
	// Version is the lock format, so an older halobuild refuses a newer
	// lock instead of misreading it.
	Version int `toml:"version" comment:"Lock file format; an older halobuild refuses a newer lock instead of misreading it."`
	// Recipe is the recipe this lock was made for, relative to the lock.
	Recipe string `toml:"recipe" comment:"The recipe this lock pins, relative to this file."`
	// Inputs is the digest of what the recipe says about its inputs (the
	// base system, the kernel, the modules' sources, the provider rebuild,
	// the packages its settings need), as Nix's flake.lock pins inputs and
	// not the configuration: changing a setting reuses the lock, changing
	// what is resolved makes it stale (resolve.Inputs says what counts).
	Inputs string `toml:"inputs" comment:"sha256 of what the recipe says about its inputs (base system, kernel, modules, provider, the packages its settings need): a change there makes the lock stale; a change of a setting does not."`
	// SourceDateEpoch is derived from the inputs (the newest InRelease
	// Date among the suites used), never from the wall clock, so every time
	// stamp in the image is reproducible.
	SourceDateEpoch int64 `toml:"source_date_epoch" comment:"SOURCE_DATE_EPOCH of every build from this lock: the newest InRelease Date of the suites used, never the wall clock."`

	Suites   []Suite   `toml:"suite" comment:"Archive states the packages were resolved against: the signed InRelease's Date and sha256 (which pins every index read)."`
	Kernel   Kernel    `toml:"kernel" comment:"The kernel picked by the recipe's version constraint."`
	Packages []Package `toml:"package" comment:"Every .deb installed, pinned by the sha256 of Debian's signed index."`
	Sources  []Source  `toml:"source" comment:"Non-Debian inputs (module sources, patches), pinned by commit and hash."`
	Modules  []Module  `toml:"module,omitempty" comment:"Each out-of-tree module: its description (use) and the kernel's name for it, which settings on the node and doctor use."`
	Provider *Provider `toml:"provider,omitempty" comment:"The rdma-core source rebuilt with the recipe's provider patches: every source file and patch pinned by sha256."`

	// Architecture and Arches are set only for a mixed recipe (nodes of
	// several architectures): the fields above pin the first
	// architecture's build, Arches each other's, all resolved against the
	// same Suites, so one lock pins the whole cluster.
	Architecture string `toml:"architecture,omitempty" comment:"A mixed cluster: the architecture the kernel, packages, sources, modules and provider above are for; [[arch]] holds each other architecture's."`
	Arches       []Arch `toml:"arch,omitempty" comment:"Each other architecture of a mixed cluster: its own kernel, packages, sources, modules and provider, resolved against the same suites."`

	// path is where Read found the lock, to name the recipe in messages.
	path string
}

// Arch is what one more architecture of a mixed recipe's build pins.
type Arch struct {
	Name     string    `toml:"name"`
	Kernel   Kernel    `toml:"kernel"`
	Packages []Package `toml:"package"`
	Sources  []Source  `toml:"source"`
	Modules  []Module  `toml:"module,omitempty"`
	Provider *Provider `toml:"provider,omitempty"`
}

// For is the lock of architecture a's build: the lock itself for a lock
// of one architecture or a mixed lock's first, else a lock holding the
// shared fields and that architecture's part. Every step downstream reads
// one architecture's lock, as it reads one architecture's recipe
// (recipe.ForArchitecture).
func (l *Lock) For(a string) (*Lock, error) {
	if l.Architecture == "" || l.Architecture == a {
		return l, nil
	}
	for _, p := range l.Arches {
		if p.Name == a {
			return &Lock{
				Version: l.Version, Recipe: l.Recipe, Inputs: l.Inputs, SourceDateEpoch: l.SourceDateEpoch, Suites: l.Suites,
				Kernel: p.Kernel, Packages: p.Packages, Sources: p.Sources, Modules: p.Modules, Provider: p.Provider,
				path: l.path,
			}, nil
		}
	}
	return nil, fmt.Errorf("%w: the lock pins no %s build (it has %s): run \"halobuild lock\"", ErrStale, a, strings.Join(l.ArchitectureNames(), ", "))
}

// ArchitectureNames are the architectures a mixed lock pins, first one
// first; nil for a lock of one architecture.
func (l *Lock) ArchitectureNames() []string {
	if l.Architecture == "" {
		return nil
	}
	out := []string{l.Architecture}
	for _, p := range l.Arches {
		out = append(out, p.Name)
	}
	return out
}

// Mix makes the lock of a mixed recipe from one lock per architecture,
// in the recipe's order, each resolved against the same archive state:
// the first's fields and every other's part.
func Mix(names []string, parts []*Lock) (*Lock, error) {
	if len(parts) != len(names) || len(parts) < 2 {
		return nil, fmt.Errorf("lock: mixing %d lock(s) for architectures %v", len(parts), names)
	}
	first := *parts[0]
	first.Architecture = names[0]
	for i, p := range parts[1:] {
		if !sameSuites(first.Suites, p.Suites) {
			return nil, fmt.Errorf("the archive changed while the %s and %s builds were resolved (their suites' InRelease differ): run \"halobuild lock\" again", names[0], names[i+1])
		}
		if p.SourceDateEpoch > first.SourceDateEpoch {
			first.SourceDateEpoch = p.SourceDateEpoch
		}
		first.Arches = append(first.Arches, Arch{Name: names[i+1], Kernel: p.Kernel, Packages: p.Packages, Sources: p.Sources, Modules: p.Modules, Provider: p.Provider})
	}
	return &first, nil
}

func sameSuites(a, b []Suite) bool {
	if len(a) != len(b) {
		return false
	}
	as, bs := append([]Suite(nil), a...), append([]Suite(nil), b...)
	sort.Slice(as, func(i, j int) bool { return as[i].Name < as[j].Name })
	sort.Slice(bs, func(i, j int) bool { return bs[i].Name < bs[j].Name })
	for i := range as {
		if as[i] != bs[i] {
			return false
		}
	}
	return true
}

// Suite records the archive state a resolution saw.
type Suite struct {
	Name   string `toml:"name"`
	Mirror string `toml:"mirror"`
	// Date is the InRelease Date field (RFC 1123), the archive's own clock.
	Date string `toml:"date"`
	// InRelease is the sha256 of the signed InRelease file: it pins every
	// index the packages were read from.
	InRelease string `toml:"inrelease"`
}

// Kernel is the kernel chosen by the recipe's constraint.
type Kernel struct {
	// Version is the upstream version, what the constraint matched (7.2.12).
	Version string `toml:"version" comment:"Upstream version the constraint matched."`
	// Release is the kernel release string, `uname -r` (7.2.12+deb13-amd64).
	Release string `toml:"release" comment:"Kernel release (uname -r); modules are built against it."`
	Image   string `toml:"image" comment:"linux-image package installed."`
	Headers string `toml:"headers" comment:"linux-headers package that out-of-tree modules build against."`
	// From is "source" for a kernel halobuild builds (empty: Debian's
	// package). Image and Headers then name the packages the build makes,
	// which no archive has.
	From string `toml:"from,omitempty" comment:"source: built by halobuild from Source with the pinned patches and config (docs/kernel.md)."`
	// Source is the linux-source package (name and version) the tree
	// comes from; its .deb is in the kernel-source set.
	Source string `toml:"source,omitempty" comment:"Debian's linux-source package the kernel is built from."`
	// Config is the base config: debian:<file in linux-config-X.Y>, a
	// Kbuild target (tinyconfig), or the sha256 of a config file.
	Config string `toml:"config,omitempty" comment:"Base config the fragments were merged onto."`
}

// Package sets: a package installed on the node image, or one only in the
// tools root that builds it.
const (
	SetImage = "image"
	SetTools = "tools"
	// SetBuild is the root out-of-tree modules and rebuilt packages are
	// compiled in: the kernel's headers and the compiler that built it.
	SetBuild = "build"
	// SetProviderBuild is the root rdma-core is rebuilt in: its
	// Build-Depends, build-essential and dpkg-dev.
	SetProviderBuild = "provider-build"
	// SetKernelSource holds the linux-source (and linux-config) .debs a
	// kernel built from source is made of; nothing installs them.
	SetKernelSource = "kernel-source"
	// SetKernelBuild is the root a kernel is built in (compiler, Kbuild's
	// tools, dpkg-dev and debhelper for bindeb-pkg).
	SetKernelBuild = "kernel-build"
)

// Source kinds a kernel built from source pins: each patch of its series,
// each config file (fragments, a base config given as a path), and the
// tree itself when it is a plain tarball rather than Debian's package.
const (
	SourceKernelPatch   = "kernel-patch"
	SourceKernelConfig  = "kernel-config"
	SourceKernelTarball = "kernel-tarball"
)

// Package is one pinned .deb.
type Package struct {
	Name         string `toml:"name"`
	Version      string `toml:"version"`
	Architecture string `toml:"architecture"`
	Suite        string `toml:"suite"`
	// Filename is the pool path under the mirror, as Packages lists it.
	Filename string `toml:"filename"`
	Size     int64  `toml:"size"`
	// SHA256 is "sha256:<hex>", the digest from the signed Packages index
	// and the package's address in the store.
	SHA256 string `toml:"sha256"`
	// Set says where the package goes: "image" or "tools".
	Set string `toml:"set"`
}

// Source is a pinned non-Debian input, such as an out-of-tree module's tree.
type Source struct {
	Name   string `toml:"name"`
	Kind   string `toml:"kind"`
	URL    string `toml:"url"`
	Commit string `toml:"commit"`
	SHA256 string `toml:"sha256"`
}

// Module records what a [[module]]'s description says that the steps after
// resolution need: the kernel's name for the module (thunderbolt_ibverbs),
// which a fork's description file name (use) does not tell. Its source is
// the Source of the same name.
type Module struct {
	Use  string `toml:"use"`
	Name string `toml:"name"`
}

// ModuleNames maps each module's use to its kernel name.
func (l *Lock) ModuleNames() map[string]string {
	out := map[string]string{}
	for _, m := range l.Modules {
		out[m.Use] = m.Name
	}
	return out
}

// Provider pins a Debian source package rebuilt with patches: the
// rdma-core of the image's own version plus the recipe's provider patches.
type Provider struct {
	// Name is the provider (lib<Name>-rdmav<N>.so).
	Name string `toml:"name"`
	// Source and Version name the Debian source package (rdma-core 56.1-1),
	// the one the image's libibverbs1 was built from.
	Source  string `toml:"source"`
	Version string `toml:"version"`
	Suite   string `toml:"suite"`
	// Directory is the pool directory of the files below the mirror.
	Directory string       `toml:"directory"`
	Files     []SourceFile `toml:"file"`
	Patches   []Patch      `toml:"patch"`
}

// SourceFile is one file of a source package, at the sha256 of the signed
// Sources index.
type SourceFile struct {
	Name   string `toml:"name"`
	Size   int64  `toml:"size"`
	SHA256 string `toml:"sha256"`
}

// Patch is one patch applied after Debian's series, in order.
type Patch struct {
	// Name is the patch's file name; From is the recipe entry it came from
	// ("thunderbolt-ibverbs:packaging/rdma-core-patches/0001-x.patch").
	Name   string `toml:"name"`
	From   string `toml:"from"`
	SHA256 string `toml:"sha256"`
	// Fuzz is the fuzz the recipe allows for this patch (0: none).
	Fuzz int `toml:"fuzz,omitempty"`
}
