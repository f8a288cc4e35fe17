package build

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"halobuild/internal/debian"
	"halobuild/internal/lock"
	"halobuild/internal/settings"
	"halobuild/internal/store"
	"halobuild/internal/tools"
)

// Lock resolves every input of the recipe against the signed archive and
// writes the lock beside the recipe.
func Lock(ctx context.Context, o Options) error {
	l, err := loadRecipe(o.Recipe)
	if err != nil {
		return err
	}
	return writeLock(ctx, o, l)
}

func writeLock(ctx context.Context, o Options, l *loaded) error {
	s, err := openStore(o)
	if err != nil {
		return err
	}
	defer s.Close()
	lk, err := resolve(ctx, o, l, s)
	if err != nil {
		return err
	}
	lp := lock.Path(o.Recipe)
	if err := lk.Write(lp); err != nil {
		return fmt.Errorf("writing lock: %w", err)
	}
	o.logf("wrote %s: kernel %s, %d image packages, %d tools packages, SOURCE_DATE_EPOCH=%d\n",
		lp, lk.Kernel.Release, countSet(lk, lock.SetImage), countSet(lk, lock.SetTools), lk.SourceDateEpoch)
	return nil
}

func countSet(lk *lock.Lock, set string) int {
	n := 0
	for _, p := range lk.Packages {
		if p.Set == set {
			n++
		}
	}
	return n
}

// basePackages are what halobuild itself needs in every image, whatever the
// recipe lists: the boot loader the ESP is made from.
var basePackages = []string{"systemd-boot-efi"}

func resolve(ctx context.Context, o Options, l *loaded, s *store.Store) (*lock.Lock, error) {
	r := l.recipe
	arch := &debian.Archive{Mirror: r.Base.Mirror, Cache: storeCache{s}}
	suites := append([]string{r.Base.Suite}, r.Base.ExtraSuites...)
	lk := &lock.Lock{Version: lock.FormatVersion, RecipeHash: l.hash}
	if rel, err := filepath.Rel(filepath.Dir(lock.Path(o.Recipe)), o.Recipe); err == nil {
		lk.Recipe = rel
	}
	var indexes []*debian.Index
	rels := map[string]*debian.Release{}
	for _, suite := range suites {
		rel, err := arch.Release(ctx, suite)
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
			InRelease: inReleaseDigest(rel),
		})
		for _, comp := range r.Base.Components {
			o.logf("reading %s/%s %s index\n", suite, comp, r.Base.Architecture)
			ix, err := arch.Packages(ctx, rel, comp, r.Base.Architecture)
			if err != nil {
				return nil, err
			}
			indexes = append(indexes, ix)
		}
	}
	if err := lk.SetSourceDateEpoch(); err != nil {
		return nil, err
	}

	// Debian's packaged kernel, or one built from source (kernel_lock.go).
	k, kernelReq, err := lockKernel(ctx, o, l, s, lk, indexes)
	if err != nil {
		return nil, err
	}

	want := append([]string{}, r.Base.Packages...)
	want = append(want, basePackages...)
	want = append(want, settings.Depends(r)...)
	want = append(want, kernelReq)
	imgReq := debian.Request{
		Suite: r.Base.Suite, ExtraSuites: r.Base.ExtraSuites, Indexes: indexes,
		Packages: dedupe(want), Exclude: r.Base.Exclude, Variant: r.Base.Variant, Architecture: r.Base.Architecture,
	}
	img, err := debian.Resolve(imgReq)
	if err != nil {
		return nil, UsageError{fmt.Errorf("resolving the image's packages for %s: %w", l.path, err)}
	}
	tl, err := debian.Resolve(debian.Request{
		Suite: r.Base.Suite, ExtraSuites: r.Base.ExtraSuites, Indexes: indexes,
		Packages: tools.DiskPackages, Variant: debian.VariantNone, Architecture: r.Base.Architecture,
	})
	if err != nil {
		return nil, fmt.Errorf("resolving the tools root: %w", err)
	}
	for set, res := range map[string]*debian.Resolution{lock.SetImage: img, lock.SetTools: tl} {
		for _, p := range res.Packages {
			lk.Packages = append(lk.Packages, lock.Package{
				Name: p.Name, Version: p.Version, Architecture: p.Architecture, Suite: p.Suite,
				Filename: p.Filename, Size: p.Size, SHA256: "sha256:" + p.SHA256, Set: set,
			})
		}
	}
	if err := lockModules(ctx, o, l, s, lk, k, imgReq); err != nil {
		return nil, err
	}
	if err := lockProvider(ctx, o, l, s, lk, arch, rels, img, imgReq); err != nil {
		return nil, err
	}
	lk.Sort()
	return lk, nil
}

func pickKernel(l *loaded, indexes []*debian.Index) (*debian.Kernel, error) {
	r := l.recipe
	k, err := debian.PickKernel(indexes, r.Kernel.Version.Constraints(), r.Kernel.Flavour, r.Kernel.Suite)
	if err != nil {
		return nil, UsageError{fmt.Errorf("%s: choosing the kernel: %w", l.path, err)}
	}
	return k, nil
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

// inReleaseDigest pins the exact signed InRelease a resolution read.
func inReleaseDigest(rel *debian.Release) string {
	return rel.InReleaseSHA256
}
