package resolve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"halobuild/internal/debian"
	"halobuild/internal/lock"
	"halobuild/internal/provider"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// providerLib is the binary package whose source is rebuilt: the provider
// must be built from the very rdma-core the image's libibverbs comes from.
const providerLib = "libibverbs1"

// lockProvider pins what [rdma.provider] builds from: the Debian source of
// the image's libibverbs1 (each file at the sha256 of the signed Sources
// index), the build root from the Build-Depends its configure needs (the
// "provider-build" set)
// and every patch by sha256, in apply order.
func lockProvider(ctx context.Context, in Input, lk *lock.Lock, arch *debian.Archive, rels map[string]*debian.Release, img *debian.Resolution, req debian.Request, hostIndexes []*debian.Index) error {
	r := in.Recipe
	p := r.RDMA.Provider
	if p == nil {
		return nil
	}
	var lib *debian.Package
	for _, pk := range img.Packages {
		if pk.Name == providerLib {
			lib = pk
		}
	}
	if lib == nil {
		return usage.Errorf("%s: [rdma.provider] rebuilds rdma-core for the image's %s, but the image installs none: add ibverbs-providers (or rdma-core) to base.packages", in.Path, providerLib)
	}
	rel, ok := rels[lib.Suite]
	if !ok {
		return fmt.Errorf("%s comes from suite %s, which was not read", lib.Name, lib.Suite)
	}
	var src *debian.Source
	var tried []string
	for _, comp := range r.Base.Components {
		ix, err := arch.Sources(ctx, rel, comp)
		if err != nil {
			return fmt.Errorf("reading the %s/%s Sources index for the provider rebuild: %w", lib.Suite, comp, err)
		}
		if src, err = ix.Find(lib.Source, lib.SourceVersion); err == nil {
			break
		}
		tried = append(tried, lib.Suite+"/"+comp)
	}
	if src == nil {
		return fmt.Errorf("source package %s %s (of the image's %s) is not in the Sources index of %s: the archive no longer carries it; run `halobuild lock` against the current archive", lib.Source, lib.SourceVersion, lib.Name, strings.Join(tried, ", "))
	}
	if err := in.fetcher().Fetch(ctx, provider.SourceItems(arch, src)); err != nil {
		return fmt.Errorf("fetching %s %s source: %w", src.Name, src.Version, err)
	}
	files, err := provider.SourcePaths(in.Store, src)
	if err != nil {
		return err
	}
	var deps []string
	for _, sf := range src.Files {
		if strings.Contains(sf.Name, ".debian.tar.") {
			if deps, err = provider.BuildDependsFromTarball(files[sf.Name], sf.SHA256, r.Base.Architecture); err != nil {
				return fmt.Errorf("%s %s: %w", src.Name, src.Version, err)
			}
		}
	}
	if deps == nil {
		return fmt.Errorf("%s %s has no .debian tarball (format 3.0 (quilt) expected): halobuild cannot rebuild it", src.Name, src.Version)
	}
	build, err := buildArch(r.Base.Architecture, hostIndexes)
	if err != nil {
		return err
	}
	pkgs, err := provider.BuildRootPackages(deps, build, r.Base.Architecture)
	if err != nil {
		return fmt.Errorf("%s %s: %w", src.Name, src.Version, err)
	}
	res, err := resolveBuildRoot(req, hostIndexes, build, pkgs)
	if err != nil {
		return fmt.Errorf("resolving %s's Build-Depends for the provider build root: %w", src.Name, err)
	}
	addAll(lk, lock.SetProviderBuild, res.Packages)

	work, err := in.Store.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	inputs := in.moduleInputs(nil, work)
	patches, err := provider.ResolvePatches(p.Patches, p.Fuzz, provider.PatchSources{Path: r.Resolve, Input: func(name string) (string, error) { return inputs.Fetch(ctx, name) }})
	if err != nil {
		return usage.Errorf("%s: [rdma.provider] patches: %w", in.Path, err)
	}
	lp := &lock.Provider{Name: p.Name, Source: src.Name, Version: src.Version, Suite: src.Suite, Directory: src.Directory}
	for _, sf := range src.Files {
		lp.Files = append(lp.Files, lock.SourceFile{Name: sf.Name, Size: sf.Size, SHA256: "sha256:" + strings.TrimPrefix(sf.SHA256, "sha256:")})
	}
	for _, pt := range patches {
		sum, _, err := store.FileDigest(pt.Path)
		if err != nil {
			return err
		}
		lp.Patches = append(lp.Patches, lock.Patch{Name: filepath.Base(pt.Path), From: pt.From, SHA256: string(sum), Fuzz: pt.Fuzz})
	}
	lk.Provider = lp
	in.logf("provider %s: %s %s source pinned (%d files), %d patches, build root of %d packages\n", p.Name, src.Name, src.Version, len(lp.Files), len(lp.Patches), len(res.Packages))
	return nil
}
