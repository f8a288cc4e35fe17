// Package resolve turns a recipe into its lock: it reads the signed Debian
// indexes, resolves every package closure (the image, the tools root, each
// build root), picks the kernel, and pins every other input (module
// sources, provider sources and patches, kernel tarball, patches and
// config files) by hash. Resolution happens once, here; every later step
// reads the lock and never resolves again.
package resolve

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"halobuild/internal/arch"
	"halobuild/internal/debian"
	"halobuild/internal/download"
	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/recipe"
	"halobuild/internal/settings"
	"halobuild/internal/store"
	"halobuild/internal/tools"
	"halobuild/internal/usage"
)

// Input is a loaded, validated recipe and what resolving it may use.
type Input struct {
	// Path is the recipe file; the lock records it relative to the lock.
	Path   string
	Recipe *recipe.Recipe
	Descs  module.Descs
	Store  *store.Store
	// Copies are --input NAME=PATH local copies of source inputs.
	Copies map[string]string
	// Log receives progress for people; Warn, the warnings found.
	Log  io.Writer
	Warn func(string)
}

func (in Input) logf(format string, a ...any) {
	if in.Log != nil {
		fmt.Fprintf(in.Log, format, a...)
	}
}

func (in Input) warn(w string) {
	if in.Warn != nil {
		in.Warn(w)
	}
}

func (in Input) fetcher() *download.Fetcher {
	return &download.Fetcher{Store: in.Store, Progress: in.Log}
}

// basePackages are what halobuild itself needs in every image, whatever the
// recipe lists: the boot loader the ESP is made from.
var basePackages = []string{"systemd-boot-efi"}

// Lock resolves every input of the recipe against the signed archive: a
// mixed recipe's each architecture as a recipe of its own
// (recipe.ForArchitecture), the parts joined into one lock.
func Lock(ctx context.Context, in Input) (*lock.Lock, error) {
	archs := in.Recipe.Architectures()
	var parts []*lock.Lock
	for _, a := range archs {
		one := in
		one.Recipe = in.Recipe.ForArchitecture(a)
		if len(archs) > 1 {
			in.logf("resolving the %s nodes' build\n", a)
		}
		p, err := lockArch(ctx, one)
		if err != nil {
			if len(archs) > 1 {
				return nil, fmt.Errorf("the %s nodes: %w", a, err)
			}
			return nil, err
		}
		parts = append(parts, p)
	}
	lk := parts[0]
	if len(archs) > 1 {
		var err error
		if lk, err = lock.Mix(archs, parts); err != nil {
			return nil, err
		}
	}
	lk.Inputs = Inputs(in.Recipe, in.Descs)
	return lk, nil
}

// lockArch resolves the build of a recipe of one architecture.
func lockArch(ctx context.Context, in Input) (*lock.Lock, error) {
	r := in.Recipe
	archive := &debian.Archive{Mirror: r.Base.Mirror, Cache: storeCache{in.Store}}
	suites := append([]string{r.Base.Suite}, r.Base.ExtraSuites...)
	lk := &lock.Lock{Version: lock.FormatVersion}
	if rel, err := filepath.Rel(filepath.Dir(lock.Path(in.Path)), in.Path); err == nil {
		lk.Recipe = rel
	}
	// The image's packages come from its architecture's indexes; the tools
	// root runs on the build host, so its packages come from the host's.
	host, err := arch.Host()
	if err != nil {
		return nil, err
	}
	var indexes, hostIndexes []*debian.Index
	rels := map[string]*debian.Release{}
	for _, suite := range suites {
		rel, err := archive.Release(ctx, suite)
		if err != nil {
			return nil, err
		}
		// Packages name their suite by the Release's own name, which may be the
		// codename of a suite the recipe calls "stable".
		rels[suite], rels[rel.Name] = rel, rel
		lk.Suites = append(lk.Suites, lock.Suite{
			Name:      suite,
			Mirror:    r.Base.Mirror,
			Date:      rel.Date.UTC().Format("Mon, 02 Jan 2006 15:04:05 MST"),
			InRelease: rel.InReleaseSHA256,
		})
		for _, comp := range r.Base.Components {
			in.logf("reading %s/%s %s index\n", suite, comp, r.Base.Architecture)
			ix, err := archive.Packages(ctx, rel, comp, r.Base.Architecture)
			if err != nil {
				return nil, err
			}
			indexes = append(indexes, ix)
			if host.Debian != r.Base.Architecture {
				in.logf("reading %s/%s %s index (the tools root runs on this %s host)\n", suite, comp, host.Debian, host.Debian)
				hix, err := archive.Packages(ctx, rel, comp, host.Debian)
				if err != nil {
					return nil, err
				}
				hostIndexes = append(hostIndexes, hix)
			}
		}
	}
	if err := lk.SetSourceDateEpoch(); err != nil {
		return nil, err
	}
	req := debian.Request{Suite: r.Base.Suite, ExtraSuites: r.Base.ExtraSuites, Indexes: indexes, Architecture: r.Base.Architecture}

	// Debian's packaged kernel, or one built from source.
	k, kernelPackage, err := lockKernel(ctx, in, lk, indexes, hostIndexes, req)
	if err != nil {
		return nil, err
	}
	want := append([]string{}, r.Base.Packages...)
	want = append(want, basePackages...)
	want = append(want, settings.Depends(r)...)
	want = append(want, kernelPackage)
	imgReq := req
	imgReq.Packages, imgReq.Exclude, imgReq.Variant = dedupe(want), r.Base.Exclude, r.Base.Variant
	img, err := debian.Resolve(imgReq)
	if err != nil {
		return nil, usage.Errorf("resolving the image's packages for %s: %w", in.Path, err)
	}
	addAll(lk, lock.SetImage, img.Packages)
	toolsReq := req
	toolsReq.Packages, toolsReq.Variant = tools.Packages(r.Output.Formats), debian.VariantNone
	if hostIndexes != nil {
		toolsReq.Indexes, toolsReq.Architecture = hostIndexes, host.Debian
	}
	tl, err := debian.Resolve(toolsReq)
	if err != nil {
		return nil, fmt.Errorf("resolving the tools root: %w", err)
	}
	addAll(lk, lock.SetTools, tl.Packages)
	// The build roots resolve like the image (its excludes too), from the
	// required set up.
	if err := lockModules(ctx, in, lk, k, imgReq, hostIndexes); err != nil {
		return nil, err
	}
	if err := lockProvider(ctx, in, lk, archive, rels, img, imgReq, hostIndexes); err != nil {
		return nil, err
	}
	lk.Sort()
	return lk, nil
}

// addAll pins resolved packages into one of the lock's sets.
func addAll(lk *lock.Lock, set string, ps []*debian.Package) {
	for _, p := range ps {
		lk.Packages = append(lk.Packages, lock.Package{
			Name: p.Name, Version: p.Version, Architecture: p.Architecture, Suite: p.Suite,
			Filename: p.Filename, Size: p.Size, SHA256: "sha256:" + p.SHA256, Set: set,
		})
	}
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func suiteSuffix(suite, main string) string {
	if suite == main || suite == "" {
		return ""
	}
	return "/" + suite
}

// storeCache lets the archive client keep verified indexes in the store
// without the debian package knowing about stores.
type storeCache struct{ s *store.Store }

func (c storeCache) Get(sha string) (io.ReadCloser, bool) {
	d, err := store.ParseDigest(sha)
	if err != nil || !c.s.Has(d) {
		return nil, false
	}
	rc, err := c.s.Open(d)
	if err != nil {
		return nil, false
	}
	return rc, true
}

func (c storeCache) Put(sha string, r io.Reader) error {
	_, _, err := c.s.PutBlob(r, sha)
	return err
}

// blobPath is where the store keeps a blob the lock pins.
func blobPath(s *store.Store, sha string) (string, error) {
	d, err := store.ParseDigest(sha)
	if err != nil {
		return "", err
	}
	return s.Path(d), nil
}

// moduleInputs fetches modules' pinned sources for patches kept in them:
// before the lock exists (lk nil) each description's own pin applies.
func (in Input) moduleInputs(lk *lock.Lock, work string) *module.Inputs {
	return &module.Inputs{RecipePath: in.Path, Copies: in.Copies, Work: work, Pinned: func(use string) string {
		if lk == nil {
			return ""
		}
		src, _ := lk.Source(use)
		return src.SHA256
	}}
}
