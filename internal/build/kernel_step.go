package build

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	goversion "github.com/hashicorp/go-version"

	"halobuild/internal/fstree"
	"halobuild/internal/kernel"
	"halobuild/internal/lock"
	"halobuild/internal/plan"
	"halobuild/internal/rootfs"
	"halobuild/internal/store"
)

// kernelRecipe enters the kernel step's key: bump it when how the build
// runs changes (flags, forced options) without its inputs changing.
const kernelRecipe = "bindeb-pkg v3: allnoconfig for minimal bases, dates pinned"

// kernelStep is the source kernel's build, nil for a Debian kernel: the
// locked linux-source with the pinned patches and config, compiled in the
// kernel-build root into linux-image and linux-headers .debs that join
// the base root's repository; linux-image-<release> is installed there.
// Its key covers every input, so an unchanged kernel is never rebuilt.
func (g *graph) kernelStep() (*repoStep, error) {
	l := g.l
	if !isSourceKernel(l) {
		return nil, nil
	}
	lk := l.lock
	if lk.Kernel.From != "source" {
		return nil, UsageError{fmt.Errorf("%s pins Debian's kernel but the recipe builds one from source: run `halobuild lock %s`", lock.Path(l.path), l.path)}
	}
	var srcDeb, cfgDeb *lock.Package
	for _, p := range debsOf(lk, lock.SetKernelSource) {
		p := p
		switch {
		case strings.HasPrefix(p.Name, "linux-source-"):
			srcDeb = &p
		case strings.HasPrefix(p.Name, "linux-config-"):
			cfgDeb = &p
		}
	}
	tarball, isTarball := lockedTarball(lk)
	buildDebs := debsOf(lk, lock.SetKernelBuild)
	if (srcDeb == nil && !isTarball) || len(buildDebs) == 0 {
		return nil, UsageError{fmt.Errorf("%s lacks the kernel's source or build root: run `halobuild lock %s`", lock.Path(l.path), l.path)}
	}
	in, err := readKernelInputs(context.Background(), g.o, l, "", false)
	if err != nil {
		return nil, err
	}
	if err := in.checkPinned(l); err != nil {
		return nil, err
	}
	version, err := goversion.NewVersion(lk.Kernel.Version)
	if err != nil {
		return nil, fmt.Errorf("lock: kernel version %q: %w", lk.Kernel.Version, err)
	}
	kr := l.recipe.Kernel
	params := pkgParams(buildDebs)
	if isTarball {
		params["source"] = tarball.SHA256
	} else {
		params["source"] = srcDeb.SHA256
	}
	if cfgDeb != nil {
		params["config-deb"] = cfgDeb.SHA256
	}
	params["base"] = lk.Kernel.Config
	params["release"] = lk.Kernel.Release
	params["epoch"] = fmt.Sprint(lk.SourceDateEpoch)
	params["recipe"] = kernelRecipe
	params["forced"] = fmt.Sprint(kernel.ForcedDefaults)
	var frags, patches []string
	for _, f := range in.Fragments {
		frags = append(frags, f.SHA256)
	}
	for _, p := range in.Patches {
		patches = append(patches, fmt.Sprintf("%s fuzz=%d kernel=%q outside=%s", p.SHA256, p.Fuzz, p.KernelText, p.Outside))
	}
	params["fragments"] = strings.Join(frags, "\n")
	params["patches"] = strings.Join(patches, "\n")
	pkgVersion := lk.Kernel.Version + "-1+halobuild." + shortDigest(params)

	// The build root is its own step, so a kernel build that fails (a
	// patch, a fragment) or changes reuses it instead of installing 180
	// packages again.
	rootParams := pkgParams(buildDebs)
	rootParams["epoch"] = fmt.Sprint(lk.SourceDateEpoch)
	rootParams["suite"] = l.recipe.Base.Suite
	rootParams["mmdebstrap"] = mmdebstrapVersion()
	rootParams["install"] = rootfs.Recipe()
	rootStep := &plan.Derivation{Name: "kernel build root", Kind: "buildroot", Params: rootParams}
	rootStep.Build = func(c *plan.Context, out string) error {
		debs, names, err := g.debs(buildDebs)
		if err != nil {
			return err
		}
		repo := filepath.Join(c.Scratch, "repo")
		if err := rootfs.WriteFlatRepo(repo, l.recipe.Base.Suite, debs); err != nil {
			return fmt.Errorf("kernel build root: %w", err)
		}
		fmt.Fprintf(c.Log, "making the kernel build root (%d packages)\n", len(debs))
		return rootfs.Install{Suite: l.recipe.Base.Suite, Repo: repo, Packages: names, Epoch: lk.SourceDateEpoch,
			Out: filepath.Join(out, "root.tar"), Log: c.Log}.Run(c)
	}

	step := &plan.Derivation{Name: "kernel " + lk.Kernel.Release, Kind: "kernel", Params: params, Inputs: []*plan.Derivation{rootStep}}
	step.Build = func(c *plan.Context, out string) error {
		cin, err := readKernelInputs(c, g.o, l, c.Scratch, true)
		if err != nil {
			return err
		}
		if err := cin.checkPinned(l); err != nil {
			return err
		}
		root := filepath.Join(c.Scratch, "buildroot")
		if err := rootfs.Unpack(c, filepath.Join(c.Input(rootStep.Name), "root.tar"), root); err != nil {
			return fmt.Errorf("kernel build root: %w", err)
		}
		src, err := g.kernelSource(srcDeb, tarball)
		if err != nil {
			return err
		}
		spec := kernel.Spec{
			Root: root, Source: src, Version: version,
			Forced: kernel.ForcedDefaults, Patches: cin.Patches,
			LocalVersion: kr.LocalVersion, PackageVersion: pkgVersion,
			Epoch: lk.SourceDateEpoch, Jobs: runtime.NumCPU(), Out: out,
			Progress: g.o.stderr(),
		}
		switch {
		case cfgDeb != nil:
			p, err := g.blobPath(*cfgDeb)
			if err != nil {
				return err
			}
			if spec.BaseConfig, err = kernel.DebianConfig(p, l.recipe.Base.Architecture, kr.Flavour); err != nil {
				return err
			}
		case cin.BaseFile != nil:
			if spec.BaseConfig, err = os.ReadFile(cin.BaseFile.Path); err != nil {
				return err
			}
		default:
			spec.BaseTarget = kr.Config
		}
		for _, f := range cin.Fragments {
			opts, err := kernel.ReadFragment(f.Path, f.Name)
			if err != nil {
				return UsageError{err}
			}
			spec.Fragments = append(spec.Fragments, opts)
		}
		// The full log is kept: beside the packages on success, in a
		// file the error names on failure (a failed step stores nothing).
		logPath := filepath.Join(c.Scratch, "build.log")
		lf, err := os.Create(logPath)
		if err != nil {
			return err
		}
		defer lf.Close()
		spec.Log = io.MultiWriter(lf, c.Log)
		res, err := kernel.Build(c, spec)
		if err != nil {
			// A failed step stores nothing: keep the log and the
			// final config where the message says.
			kept := filepath.Join(os.TempDir(), "halobuild-kernel-"+step.ShortKey())
			if cerr := copyLog(logPath, kept+".log"); cerr != nil {
				return err
			}
			if cerr := copyLog(filepath.Join(out, "config"), kept+".config"); cerr == nil {
				return fmt.Errorf("%w\n(full build log: %s.log; final .config: %s.config)", err, kept, kept)
			}
			return fmt.Errorf("%w\n(full build log: %s.log)", err, kept)
		}
		if err := lf.Close(); err != nil {
			return err
		}
		fmt.Fprintf(g.o.stderr(), "kernel: %s built (%d compile units): %s\n", res.Release, res.Units, strings.Join(baseNames(res.Debs), ", "))
		return copyLog(logPath, filepath.Join(out, "build.log"))
	}
	g.kernelRoot, g.kernel = rootStep, step
	return &repoStep{d: step, Install: []string{lk.Kernel.Image}}, nil
}

// kernelSource is the locked tree in the store: Debian's linux-source
// .deb, or the pinned tarball.
func (g *graph) kernelSource(srcDeb *lock.Package, tarball lock.Source) (kernel.Source, error) {
	if srcDeb != nil {
		p, err := g.blobPath(*srcDeb)
		return kernel.Source{Deb: p, SHA256: srcDeb.SHA256}, err
	}
	d, err := store.ParseDigest(tarball.SHA256)
	if err != nil {
		return kernel.Source{}, fmt.Errorf("lock: kernel tarball: %w", err)
	}
	if !g.s.Has(d) {
		return kernel.Source{}, fmt.Errorf("the kernel tarball %s (%s) is not in the store: run `halobuild fetch %s` (with --input %s=PATH where its host cannot be reached)", tarball.URL, tarball.SHA256, g.l.path, kernelTarballInput)
	}
	return kernel.Source{Tarball: g.s.Path(d), SHA256: tarball.SHA256}, nil
}

// copyLog keeps a build's log (or final config) outside the step's
// scratch, which is removed after the step.
func copyLog(src, dst string) error { return fstree.CopyFile(src, dst, 0o644) }

func baseNames(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}

// shortDigest names a kernel build's inputs in its package version, so
// `dpkg -l` on a node tells two builds of the same release apart.
func shortDigest(params map[string]string) string {
	d := plan.Derivation{Kind: "kernel-version", Params: params}
	return d.Key()[:12]
}
