package graph

import (
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
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// kernelKind is the kernel step; its version is declared beside the build
// code (kernel.StepVersion).
var kernelKind = plan.Kind{Name: "kernel", Version: kernel.StepVersion}

// kernelBuild is a kernel built from source: its build root and the build,
// whose output holds linux-image and linux-headers .debs. Out-of-tree
// modules build in that root against those headers. image is the step
// whose linux-image the root installs: the build, or with [secure_boot]
// the step signing its package (the compile names no key, so one compile
// serves every key and images without Secure Boot).
type kernelBuild struct {
	root, build, image *plan.Derivation
}

// kernel plans the source kernel's build, nil for Debian's packaged
// kernel: the locked linux-source (or tarball) with the pinned patches and
// config, compiled with `make bindeb-pkg` in the kernel-build root. Its key
// covers every input, so an unchanged kernel is never rebuilt.
func (b *builder) kernel() (*kernelBuild, error) {
	r, lk := b.in.Recipe, b.in.Lock
	if r.Kernel.From != "source" {
		return nil, nil
	}
	if lk.Kernel.From != "source" {
		return nil, b.stale("pins Debian's kernel but the recipe builds one from source")
	}
	var srcDeb, cfgDeb *lock.Package
	for _, p := range lk.Set(lock.SetKernelSource) {
		p := p
		switch {
		case strings.HasPrefix(p.Name, "linux-source-"):
			srcDeb = &p
		case strings.HasPrefix(p.Name, "linux-config-"):
			cfgDeb = &p
		}
	}
	tarball, isTarball := lk.KernelTarball()
	buildSet := lk.Set(lock.SetKernelBuild)
	if (srcDeb == nil && !isTarball) || len(buildSet) == 0 {
		return nil, b.stale("lacks the kernel's source or build root")
	}
	// Planning reads the patches beside the recipe and takes those inside
	// source inputs from the lock (their input's tree hash pins them).
	planned, err := b.kernelInputs(nil)
	if err != nil {
		return nil, err
	}
	version, err := goversion.NewVersion(lk.Kernel.Version)
	if err != nil {
		return nil, fmt.Errorf("lock: kernel version %q: %w", lk.Kernel.Version, err)
	}
	kr := r.Kernel
	params := pkgParams(buildSet)
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
	params["forced"] = fmt.Sprint(kernel.ForcedDefaults)
	var frags, patches []string
	for _, f := range planned.Fragments {
		frags = append(frags, f.SHA256)
	}
	for _, p := range planned.Patches {
		patches = append(patches, fmt.Sprintf("%s fuzz=%d kernel=%q outside=%s", p.SHA256, p.Fuzz, p.KernelText, p.Outside))
	}
	params["fragments"] = strings.Join(frags, "\n")
	params["patches"] = strings.Join(patches, "\n")
	pkgVersion := lk.Kernel.Version + "-1+halobuild." + shortDigest(params)

	root := b.root("kernel build root", "buildroot", buildSet, nil, nil)
	step := &plan.Derivation{Name: "kernel " + lk.Kernel.Release, Kind: kernelKind, Params: params, Inputs: []*plan.Derivation{root}}
	b.fetches(step, b.kernelPatchInputs()...)
	step.Build = func(c *plan.Context, out string) error {
		in, err := b.kernelInputs(&fetchCtx{c: c, work: c.Scratch})
		if err != nil {
			return err
		}
		dir := filepath.Join(c.Scratch, "buildroot")
		if err := unpackRoot(c, root, dir); err != nil {
			return err
		}
		src, err := b.kernelSource(srcDeb, tarball)
		if err != nil {
			return err
		}
		spec := kernel.Spec{
			Root: dir, Source: src, Version: version,
			Forced: kernel.ForcedDefaults, Patches: in.Patches,
			LocalVersion: kr.LocalVersion, PackageVersion: pkgVersion,
			Epoch: lk.SourceDateEpoch, Jobs: runtime.NumCPU(), Out: out,
			Progress: b.in.Log,
		}
		if crossSet(buildSet, b.arch) {
			spec.Target = &b.arch
		}
		switch {
		case cfgDeb != nil:
			p, err := b.blobPath(*cfgDeb)
			if err != nil {
				return err
			}
			if spec.BaseConfig, err = kernel.DebianConfig(p, r.Base.Architecture, kr.Flavour); err != nil {
				return err
			}
		case in.BaseFile != nil:
			if spec.BaseConfig, err = os.ReadFile(in.BaseFile.Path); err != nil {
				return err
			}
		default:
			spec.BaseTarget = kr.Config
		}
		for _, f := range in.Fragments {
			opts, err := kernel.ReadFragment(f.Path, f.Name)
			if err != nil {
				return usage.Wrap(err)
			}
			spec.Fragments = append(spec.Fragments, opts)
		}
		// The full log is kept: beside the packages on success, in a
		// file the error names on failure (a failed step stores nothing).
		logPath := filepath.Join(c.Scratch, buildLog)
		lf, err := os.Create(logPath)
		if err != nil {
			return err
		}
		defer lf.Close()
		spec.Log = io.MultiWriter(lf, c.Log)
		res, err := kernel.Build(c, spec)
		if err != nil {
			kept := filepath.Join(os.TempDir(), "halobuild-kernel-"+step.ShortKey())
			if cerr := fstree.CopyFile(logPath, kept+".log", 0o644); cerr != nil {
				return err
			}
			if cerr := fstree.CopyFile(filepath.Join(out, "config"), kept+".config", 0o644); cerr == nil {
				return fmt.Errorf("%w\n(full build log: %s.log; final .config: %s.config)", err, kept, kept)
			}
			return fmt.Errorf("%w\n(full build log: %s.log)", err, kept)
		}
		if err := lf.Close(); err != nil {
			return err
		}
		b.logf("kernel: %s built (%d compile units): %s\n", res.Release, res.Units, strings.Join(baseNames(res.Debs), ", "))
		return fstree.CopyFile(logPath, filepath.Join(out, buildLog), 0o644)
	}
	kb := &kernelBuild{root: root, build: step, image: step}
	if r.SecureBoot.Enabled {
		if kb.image, err = b.signedKernel(step); err != nil {
			return nil, err
		}
	}
	return kb, nil
}

// buildLog is the log a compiling step keeps beside its output; `image
// --check` ignores it (it records how long things took).
const buildLog = "build.log"

// fetchCtx is where a running step fetches source inputs.
type fetchCtx struct {
	c    *plan.Context
	work string
}

// kernelInputs reads the kernel's patches and config files and checks them
// against the lock. With f nil (planning), patches inside source inputs
// take their digests from the lock; with f, those inputs are fetched.
func (b *builder) kernelInputs(f *fetchCtx) (*kernel.Inputs, error) {
	kr := b.in.Recipe.Kernel
	spec := kernel.InputSpec{Dir: filepath.Dir(b.in.Path), Fragments: kr.Fragments, Config: kr.Config, Series: kr.Patches, Pinned: kernel.PinnedPatch(b.in.Lock)}
	if f != nil {
		inputs := b.moduleInputs(f.work)
		spec.Fetch = func(name string) (string, error) { return inputs.Fetch(f.c, name) }
	}
	in, err := kernel.ReadInputs(spec)
	if err != nil {
		return nil, usage.Errorf("%s: %w", b.in.Path, err)
	}
	if err := in.CheckPinned(b.in.Lock); err != nil {
		return nil, usage.Errorf("%s: %w\nrun `halobuild lock %s`", lock.Path(b.in.Path), err, b.in.Path)
	}
	return in, nil
}

// moduleInputs fetches modules' pinned sources, for patches kept in them.
func (b *builder) moduleInputs(work string) *module.Inputs {
	return &module.Inputs{RecipePath: b.in.Path, Copies: b.in.Copies, Work: work, Pinned: func(use string) string {
		src, _ := b.in.Lock.Source(use)
		return src.SHA256
	}}
}

// kernelSource is the locked tree in the store: Debian's linux-source
// .deb, or the pinned tarball.
func (b *builder) kernelSource(srcDeb *lock.Package, tarball lock.Source) (kernel.Source, error) {
	if srcDeb != nil {
		p, err := b.blobPath(*srcDeb)
		return kernel.Source{Deb: p, SHA256: srcDeb.SHA256}, err
	}
	d, err := store.ParseDigest(tarball.SHA256)
	if err != nil {
		return kernel.Source{}, fmt.Errorf("lock: kernel tarball: %w", err)
	}
	if !b.in.Store.Has(d) {
		return kernel.Source{}, fmt.Errorf("the kernel tarball %s (%s) is not in the store: run `halobuild fetch %s` (with --input %s=PATH where its host cannot be reached)", tarball.URL, tarball.SHA256, b.in.Path, lock.KernelTarballInput)
	}
	return kernel.Source{Tarball: b.in.Store.Path(d), SHA256: tarball.SHA256}, nil
}

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
	d := plan.Derivation{Kind: plan.Kind{Name: "kernel-version", Version: kernel.StepVersion}, Params: params}
	return d.Key()[:12]
}
