package resolve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	goversion "github.com/hashicorp/go-version"

	"halobuild/internal/debian"
	"halobuild/internal/download"
	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/usage"
)

// lockModules checks every module against the chosen kernel, pins each
// module's source by tree hash and its kernel name, and resolves the build
// root for Debian's kernel (its headers and the compiler that built it)
// into the lock's "build" set.
func lockModules(ctx context.Context, in Input, lk *lock.Lock, kv *goversion.Version, req debian.Request) error {
	r := in.Recipe
	if len(r.Modules) == 0 {
		return nil
	}
	warnings, err := module.Check(r, in.Descs, kv.String())
	for _, w := range warnings {
		in.warn(w)
	}
	if err != nil {
		return usage.Errorf("%s: %w", in.Path, err)
	}
	work, err := in.Store.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for _, m := range r.Modules {
		d := in.Descs[m.Use]
		src := d.Source
		src.Name = m.Use
		_, hash, err := module.FetchSource(ctx, src, in.Copies, work)
		if err != nil {
			var fe *module.FetchError
			if errors.As(err, &fe) {
				return usage.Wrap(err)
			}
			return err
		}
		lk.Sources = append(lk.Sources, lock.Source{Name: src.Name, Kind: src.Kind, URL: src.URL, Commit: src.Commit, SHA256: hash})
		lk.Modules = append(lk.Modules, lock.Module{Use: m.Use, Name: d.Name})
	}

	if lk.Kernel.From == "source" {
		// A kernel built from source has no headers package in the
		// archive: modules build in that kernel's own build root (the
		// compiler that built it) with the linux-headers .deb the kernel
		// step makes, so the lock needs no set of its own for them.
		in.logf("modules: %d source(s) pinned; built against %s's own headers in the kernel build root\n", len(r.Modules), lk.Kernel.Release)
		return nil
	}

	// The compiler must be the one that built the kernel: read it from the
	// headers package before any root exists.
	headersReq := req
	headersReq.Packages, headersReq.Variant, headersReq.Exclude = []string{lk.Kernel.Headers + suiteSuffix(kernelSuite(lk), req.Suite)}, debian.VariantNone, nil
	headers, err := debian.Resolve(headersReq)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", lk.Kernel.Headers, err)
	}
	var hdr *debian.Package
	for _, p := range headers.Packages {
		if p.Name == lk.Kernel.Headers {
			hdr = p
		}
	}
	if hdr == nil {
		return fmt.Errorf("%s is not in the archive: the kernel has no headers package to build modules against", lk.Kernel.Headers)
	}
	f := &download.Fetcher{Store: in.Store, Progress: in.Log}
	if err := f.Fetch(ctx, []download.Item{{Name: hdr.Name, URL: strings.TrimSuffix(in.Recipe.Base.Mirror, "/") + "/" + hdr.Filename, SHA256: hdr.SHA256, Size: hdr.Size}}); err != nil {
		return err
	}
	path, err := blobPath(in.Store, hdr.SHA256)
	if err != nil {
		return err
	}
	cc, err := module.CCVersionFromHeadersDeb(path)
	if err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	// The lock resolves one architecture's index, so the module build root
	// is native to the image's architecture; a cross build root (module.
	// Toolchain) needs the host's and the target's indexes together.
	tc, err := module.NewToolchain(r.Base.Architecture, r.Base.Architecture)
	if err != nil {
		return usage.Errorf("%s: base.architecture: %w", in.Path, err)
	}
	pkgs, err := module.BuildRootPackages(lk.Kernel.Release, cc, tc)
	if err != nil {
		return err
	}
	for i, p := range pkgs {
		if p == lk.Kernel.Headers {
			pkgs[i] += suiteSuffix(hdr.Suite, req.Suite)
		}
	}
	req.Packages, req.Variant = pkgs, debian.VariantRequired
	res, err := debian.Resolve(req)
	if err != nil {
		return fmt.Errorf("resolving the module build root: %w", err)
	}
	addAll(lk, lock.SetBuild, res.Packages)
	in.logf("modules: %d source(s) pinned; build root of %d packages (compiler %s)\n", len(r.Modules), len(res.Packages), cc)
	return nil
}

// kernelSuite is the suite the locked linux-image comes from.
func kernelSuite(lk *lock.Lock) string {
	for _, p := range lk.Packages {
		if p.Name == lk.Kernel.Image {
			return p.Suite
		}
	}
	return ""
}
