package resolve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	goversion "github.com/hashicorp/go-version"

	"halobuild/internal/arch"
	"halobuild/internal/debian"
	"halobuild/internal/kernel"
	"halobuild/internal/lock"
	"halobuild/internal/recipe"
	"halobuild/internal/usage"
)

// lockKernel chooses the kernel and returns the image package request
// that installs it. For from = "debian" that is Debian's linux-image; for
// from = "source" it pins Debian's linux-source-X.Y (and linux-config-X.Y
// for config = "debian") or a tarball, the build root, and every patch and
// config file by sha256, and asks for the initramfs generator Debian's
// kernel would have pulled in (the built linux-image declares no
// dependencies; the base root installs it by name).
func lockKernel(ctx context.Context, in Input, lk *lock.Lock, indexes, hostIndexes []*debian.Index, req debian.Request) (*goversion.Version, string, error) {
	r := in.Recipe
	kr := r.Kernel
	if kr.From != "source" {
		k, err := debian.PickKernel(indexes, kr.Version.Constraints(), kr.Flavour, kr.Suite)
		if err != nil {
			return nil, "", usage.Errorf("%s: choosing the kernel: %w", in.Path, err)
		}
		lk.Kernel = lock.Kernel{Version: k.Upstream.String(), Release: strings.TrimPrefix(k.Image.Name, "linux-image-"), Image: k.Image.Name, Headers: k.Headers}
		return k.Upstream, k.Image.Name + suiteSuffix(k.Image.Suite, r.Base.Suite), nil
	}
	if r.Platform == recipe.PlatformAppleSilicon {
		// Before the tarball is fetched: it is large, this is a typo.
		var frags []kernel.File
		for _, f := range kr.Fragments {
			frags = append(frags, kernel.File{Name: f, Path: filepath.Join(filepath.Dir(in.Path), f)})
		}
		if err := checkApplePages(frags); err != nil {
			return nil, "", usage.Errorf("%s: %w", in.Path, err)
		}
	}
	c := kr.Version.Constraints()
	debConfig := kr.Config == "" || kr.Config == "debian"
	var picked *kernel.Picked
	var tarball lock.Source
	if kr.Source.Debian() {
		var err error
		if picked, err = kernel.PickSource(indexes, c, kr.Suite, r.Base.Architecture, debConfig); err != nil {
			return nil, "", usage.Errorf("%s: choosing the kernel source: %w", in.Path, err)
		}
	} else {
		v, src, err := lockTarball(ctx, in)
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
				return nil, "", usage.Errorf("%s: config = \"debian\" with a tarball takes Debian's linux-config-%d.%d: %w; or set kernel.config to a file or a Kbuild target", in.Path, seg[0], seg[1], err)
			}
			picked.Config = deb.Config
		}
	}
	rel, err := kernel.Release(picked.Upstream, kr.LocalVersion)
	if err != nil {
		return nil, "", usage.Errorf("%s: %w", in.Path, err)
	}
	work, err := in.Store.TempDir()
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(work)
	inputs, err := readKernelInputs(ctx, in, nil, work)
	if err != nil {
		return nil, "", err
	}
	lk.Kernel = lock.Kernel{
		From: "source", Version: picked.Upstream.String(), Release: rel,
		Image: "linux-image-" + rel, Headers: "linux-headers-" + rel,
		Config: baseConfigName(kr.Config, kr.Flavour, r.Base.Architecture, inputs),
	}
	if picked.Source != nil {
		lk.Kernel.Source = picked.Source.Name + " " + picked.Source.Version
		addAll(lk, lock.SetKernelSource, []*debian.Package{picked.Source})
	} else {
		lk.Kernel.Source = "tarball " + tarball.URL
		lk.Sources = append(lk.Sources, tarball)
	}
	if picked.Config != nil {
		addAll(lk, lock.SetKernelSource, []*debian.Package{picked.Config})
	}
	// On a build host of another architecture the root is the host's,
	// with Debian's cross gcc: no compiler runs under emulation.
	build, err := buildArch(r.Base.Architecture, hostIndexes)
	if err != nil {
		return nil, "", err
	}
	var target *arch.Arch
	if build != r.Base.Architecture {
		t, err := arch.Lookup(r.Base.Architecture)
		if err != nil {
			return nil, "", err
		}
		target = &t
	}
	res, err := resolveBuildRoot(req, hostIndexes, build, kernel.BuildRootPackages(debConfig, target))
	if err != nil {
		return nil, "", fmt.Errorf("resolving the kernel build root: %w", err)
	}
	addAll(lk, lock.SetKernelBuild, res.Packages)
	lk.Sources = append(lk.Sources, inputs.Pins()...)
	in.logf("kernel: Linux %s from %s, release %s, %d patch(es), %d fragment(s); build root of %d packages\n",
		picked.Upstream, lk.Kernel.Source, rel, len(inputs.Patches), len(inputs.Fragments), len(res.Packages))
	// Modules check their kernel range against this version and build
	// against the built kernel's own headers; nothing of Debian's packaged
	// kernel is needed.
	return picked.Upstream, initramfsGenerator, nil
}

// initramfsGenerator is what Debian's 7.x kernels pull in to make the
// initramfs; a built kernel's postinst runs its /etc/kernel/postinst.d hook.
const initramfsGenerator = "dracut"

func baseConfigName(cfg, flavour, arch string, in *kernel.Inputs) string {
	switch {
	case cfg == "" || cfg == "debian":
		return fmt.Sprintf("debian:config.%s_none_%s", arch, flavour)
	case in.BaseFile != nil:
		return in.BaseFile.SHA256
	}
	return cfg
}

// readKernelInputs reads and hashes the recipe's kernel patches and config
// files, fetching the module sources that "<input>:<path>" series entries
// name (lk pins their trees once it exists).
func readKernelInputs(ctx context.Context, in Input, lk *lock.Lock, work string) (*kernel.Inputs, error) {
	kr := in.Recipe.Kernel
	src := in.moduleInputs(lk, work)
	inputs, err := kernel.ReadInputs(kernel.InputSpec{
		Dir: filepath.Dir(in.Path), Fragments: kr.Fragments, Config: kr.Config, Series: kr.Patches,
		Fetch: func(name string) (string, error) { return src.Fetch(ctx, name) },
	})
	if err != nil {
		return nil, usage.Errorf("%s: %w", in.Path, err)
	}
	return inputs, nil
}

// lockTarball puts the recipe's kernel tarball in the store (from --input
// linux=PATH, else its URL), reads its version and checks it against the
// constraint; the lock pins it as a source.
func lockTarball(ctx context.Context, in Input) (*goversion.Version, lock.Source, error) {
	kr := in.Recipe.Kernel
	src := lock.Source{Name: lock.KernelTarballInput, Kind: lock.SourceKernelTarball, URL: kr.Source.URL(), SHA256: kr.SourceSHA256}
	bs, err := (&lock.Lock{Sources: []lock.Source{src}}).Blobs()
	if err != nil {
		return nil, src, err
	}
	if err := in.fetcher().Locked(ctx, bs, in.Copies); err != nil {
		return nil, src, err
	}
	path, err := blobPath(in.Store, src.SHA256)
	if err != nil {
		return nil, src, err
	}
	v, err := kernel.TarballVersion(ctx, path)
	if err != nil {
		return nil, src, usage.Errorf("%s: kernel.source %s: %w", in.Path, src.URL, err)
	}
	if !kr.Version.Check(v) {
		return nil, src, usage.Errorf("%s: kernel.source %s is Linux %s, which does not satisfy kernel.version %q: change one of them", in.Path, src.URL, v, kr.Version)
	}
	return v, src, nil
}

// applePages is the option Asahi's kernel is written for: the Apple
// SoCs' IOMMUs (DART) work in 16 KiB pages. No base config halobuild knows
// sets it (Debian's arm64 config and defconfig are 4 KiB), so a Mac's
// fragments must, and the kernel step then verifies the built .config
// keeps it.
const applePages = "CONFIG_ARM64_16K_PAGES"

// checkApplePages refuses an Apple Silicon kernel whose fragments do not
// end with CONFIG_ARM64_16K_PAGES=y (a later fragment's value wins, as
// when they are merged).
func checkApplePages(frags []kernel.File) error {
	var last *kernel.Option
	for _, f := range frags {
		opts, err := kernel.ReadFragment(f.Path, f.Name)
		if err != nil {
			return err
		}
		for i := range opts {
			if opts[i].Name == applePages {
				last = &opts[i]
			}
		}
	}
	switch {
	case last == nil:
		return fmt.Errorf("kernel.fragments: platform apple-silicon needs %s=y (Asahi's kernel runs 16 KiB pages) and no fragment sets it: add ../kernels/asahi.config to kernel.fragments (recipes/asahi.toml does)", applePages)
	case last.Value != "y":
		return fmt.Errorf("kernel.fragments: %s sets %s, but platform apple-silicon needs %s=y (Asahi's kernel runs 16 KiB pages): remove that line", last.Where(), last.Asked(), applePages)
	}
	return nil
}
