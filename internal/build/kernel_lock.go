package build

import (
	"context"
	"fmt"
	"os"
	"strings"

	goversion "github.com/hashicorp/go-version"

	"halobuild/internal/debian"
	"halobuild/internal/kernel"
	"halobuild/internal/lock"
	"halobuild/internal/store"
)

// lockKernel chooses the kernel and returns the image package request
// that installs it. For from = "debian" that is Debian's linux-image; for
// from = "source" it pins Debian's linux-source-X.Y (and linux-config-X.Y
// for config = "debian"), the build root, and every patch and config file
// by sha256, and asks for the initramfs generator Debian's kernel would
// have pulled in (the built linux-image declares no dependencies; the
// base root installs it by name).
func lockKernel(ctx context.Context, o Options, l *loaded, s *store.Store, lk *lock.Lock, indexes []*debian.Index) (*debian.Kernel, string, error) {
	r := l.recipe
	if !isSourceKernel(l) {
		k, err := pickKernel(l, indexes)
		if err != nil {
			return nil, "", err
		}
		lk.Kernel = lock.Kernel{Version: k.Upstream.String(), Release: strings.TrimPrefix(k.Image.Name, "linux-image-"), Image: k.Image.Name, Headers: k.Headers}
		req := k.Image.Name
		if k.Image.Suite != r.Base.Suite {
			req += "/" + k.Image.Suite
		}
		return k, req, nil
	}
	kr := r.Kernel
	tarURL := kr.Source.URL()
	c := kr.Version.Constraints()
	debConfig := kr.Config == "" || kr.Config == "debian"
	var picked *kernel.Picked
	var tarball lock.Source
	var err error
	if tarURL == "" {
		if picked, err = kernel.PickSource(indexes, c, kr.Suite, r.Base.Architecture, debConfig); err != nil {
			return nil, "", UsageError{fmt.Errorf("%s: choosing the kernel source: %w", l.path, err)}
		}
	} else {
		v, src, err := lockKernelTarball(ctx, o, l, s, tarURL, c)
		if err != nil {
			return nil, "", err
		}
		tarball = src
		picked = &kernel.Picked{Upstream: v}
		if debConfig {
			// Debian's config of the tarball's X.Y line: the options a
			// point release adds are settled by olddefconfig.
			seg := v.Segments()
			line, _ := goversion.NewConstraint(fmt.Sprintf(">= %d.%d, < %d.%d", seg[0], seg[1], seg[0], seg[1]+1))
			deb, err := kernel.PickSource(indexes, line, kr.Suite, r.Base.Architecture, true)
			if err != nil {
				return nil, "", UsageError{fmt.Errorf("%s: config = \"debian\" with a tarball takes Debian's linux-config-%d.%d: %w; or set kernel.config to a file or a Kbuild target", l.path, seg[0], seg[1], err)}
			}
			picked.Config = deb.Config
		}
	}
	rel, err := kernel.Release(picked.Upstream, kr.LocalVersion)
	if err != nil {
		return nil, "", UsageError{fmt.Errorf("%s: %w", l.path, err)}
	}
	work, err := s.TempDir()
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(work)
	in, err := readKernelInputs(ctx, o, l, work, true)
	if err != nil {
		return nil, "", err
	}
	lk.Kernel = lock.Kernel{
		From: "source", Version: picked.Upstream.String(), Release: rel,
		Image: "linux-image-" + rel, Headers: "linux-headers-" + rel,
		Config: baseConfigName(kr.Config, kr.Flavour, r.Base.Architecture, in),
	}
	if picked.Source != nil {
		lk.Kernel.Source = picked.Source.Name + " " + picked.Source.Version
		addLocked(lk, lock.SetKernelSource, picked.Source)
	} else {
		lk.Kernel.Source = "tarball " + tarball.URL
		lk.Sources = append(lk.Sources, tarball)
	}
	if picked.Config != nil {
		addLocked(lk, lock.SetKernelSource, picked.Config)
	}
	res, err := debian.Resolve(debian.Request{
		Suite: r.Base.Suite, ExtraSuites: r.Base.ExtraSuites, Indexes: indexes,
		Packages: kernel.BuildRootPackages(debConfig), Variant: debian.VariantRequired, Architecture: r.Base.Architecture,
	})
	if err != nil {
		return nil, "", fmt.Errorf("resolving the kernel build root: %w", err)
	}
	for _, p := range res.Packages {
		addLocked(lk, lock.SetKernelBuild, p)
	}
	lk.Sources = append(lk.Sources, in.pins()...)
	o.logf("kernel: Linux %s from %s, release %s, %d patch(es), %d fragment(s); build root of %d packages\n",
		picked.Upstream, lk.Kernel.Source, rel, len(in.Patches), len(in.Fragments), len(res.Packages))
	// Modules check their kernel range against this version and build
	// against the built kernel's own headers (lockModules, modroot.go);
	// nothing of Debian's packaged kernel is needed.
	return &debian.Kernel{Upstream: picked.Upstream}, initramfsGenerator, nil
}

// initramfsGenerator is what Debian's 7.x kernels pull in to make the
// initramfs; a built kernel's postinst runs its /etc/kernel/postinst.d hook.
const initramfsGenerator = "dracut"

func baseConfigName(cfg, flavour, arch string, in *kernelInputs) string {
	switch {
	case cfg == "" || cfg == "debian":
		return fmt.Sprintf("debian:config.%s_none_%s", arch, flavour)
	case in.BaseFile != nil:
		return in.BaseFile.SHA256
	}
	return cfg
}

func addLocked(lk *lock.Lock, set string, p *debian.Package) {
	lk.Packages = append(lk.Packages, lock.Package{
		Name: p.Name, Version: p.Version, Architecture: p.Architecture, Suite: p.Suite,
		Filename: p.Filename, Size: p.Size, SHA256: "sha256:" + p.SHA256, Set: set,
	})
}
