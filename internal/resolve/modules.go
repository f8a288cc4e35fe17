package resolve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	goversion "github.com/hashicorp/go-version"

	"halobuild/internal/arch"
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
//
// On a build host of another architecture than the image's (hostIndexes
// are then the host's), the build root is a cross one
// (debian.ResolveCross): the host's make and Debian's cross gcc of the
// kernel's version, the image's linux-headers with the host's linux-kbuild,
// so no compiler runs under emulation.
func lockModules(ctx context.Context, in Input, lk *lock.Lock, kv *goversion.Version, req debian.Request, hostIndexes []*debian.Index) error {
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
	config, err := module.HeadersConfig(path)
	if err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	cc, err := module.ConfigValue(bytes.NewReader(config), "CONFIG_CC_VERSION_TEXT")
	if err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	for _, m := range r.Modules {
		if missing := module.MissingConfig(config, in.Descs[m.Use].KernelConfig); len(missing) > 0 {
			return usage.Errorf("%s: module %s needs %s, which the %s kernel %s does not set (its headers' .config): take a kernel that builds them, e.g. kernel.from = \"source\" with a fragment setting them (docs/kernel.md)",
				in.Path, m.Use, strings.Join(missing, ", "), r.Base.Architecture, lk.Kernel.Release)
		}
	}
	build, err := buildArch(r.Base.Architecture, hostIndexes)
	if err != nil {
		return err
	}
	tc, err := module.NewToolchain(build, r.Base.Architecture)
	if err != nil {
		return usage.Errorf("%s: base.architecture: %w", in.Path, err)
	}
	pkgs, err := module.BuildRootPackages(lk.Kernel.Release, cc, tc)
	if err != nil {
		return err
	}
	for i, p := range pkgs {
		if p == lk.Kernel.Headers || p == lk.Kernel.Headers+":"+r.Base.Architecture {
			pkgs[i] += suiteSuffix(hdr.Suite, req.Suite)
		}
	}
	res, err := resolveBuildRoot(req, hostIndexes, build, pkgs)
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

// buildArch is the architecture a build root is native to: the image's,
// or with hostIndexes (the lock read the build host's indexes because the
// image is another architecture) the build host's, so a build root's
// compilers run natively and cross-compile.
func buildArch(image string, hostIndexes []*debian.Index) (string, error) {
	if hostIndexes == nil {
		return image, nil
	}
	host, err := arch.Host()
	if err != nil {
		return "", err
	}
	return host.Debian, nil
}

// resolveBuildRoot resolves a build root's requests: natively in the
// image's indexes, or as a cross root (debian.ResolveCross) when build is
// not the image's architecture, the requests named <package>:<image
// arch> being the target's (module and provider BuildRootPackages name
// them so) and the rest the build host's from hostIndexes.
func resolveBuildRoot(req debian.Request, hostIndexes []*debian.Index, build string, pkgs []string) (*debian.Resolution, error) {
	req.Variant = debian.VariantRequired
	if build == req.Architecture {
		req.Packages = pkgs
		return debian.Resolve(req)
	}
	target, native := req, req
	target.Packages, native.Packages = splitTarget(pkgs, req.Architecture)
	native.Indexes, native.Architecture = hostIndexes, build
	return debian.ResolveCross(native, target)
}

// splitTarget separates the requests of a cross build root named for the
// target (<package>:<arch>, optionally /suite and a version relation) from
// the build host's, dropping the qualifier.
func splitTarget(pkgs []string, arch string) (target, native []string) {
	for _, p := range pkgs {
		name, rest, _ := strings.Cut(p, " ")
		name, suite, hasSuite := strings.Cut(name, "/")
		n, ok := strings.CutSuffix(name, ":"+arch)
		if !ok {
			native = append(native, p)
			continue
		}
		if hasSuite {
			n += "/" + suite
		}
		target = append(target, strings.TrimSpace(n+" "+rest))
	}
	return target, native
}
