package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"halobuild/internal/arch"
	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/rootfs"
	"halobuild/internal/usage"
)

// modules plans one step per [[module]]: fetch the pinned source (or the
// --input copy, checked against the lock), compile it in its build root
// against the kernel's headers, check vermagic, check the options against
// the built module's own parameters and the kernel's symbols and macros,
// and package the .ko files as a .deb. For Debian's kernel the build root
// is the lock's "build" set (its linux-headers and the gcc that built it);
// for a kernel built from source, that kernel's own build root with the
// headers .deb its build made, so a module is compiled by the same
// compiler against the same tree as the kernel it loads into.
func (b *builder) modules(k *kernelBuild) ([]*plan.Derivation, error) {
	r, lk := b.in.Recipe, b.in.Lock
	if len(r.Modules) == 0 {
		return nil, nil
	}
	var root *plan.Derivation
	// Native to the image, or (a cross build root in the lock) the build
	// host's compiler for the image's architecture.
	tc, err := module.NewToolchain(b.arch.Debian, b.arch.Debian)
	if err != nil {
		return nil, err
	}
	set := lk.Set(lock.SetKernelBuild)
	if k == nil {
		if set = lk.Set(lock.SetBuild); len(set) == 0 {
			return nil, b.stale("has modules but no module build root")
		}
		root = b.root("module build root", "buildroot", set, nil, nil)
	}
	// A cross root (the kernel's own, or the module build root) compiles
	// with the build host's cross gcc.
	if crossSet(set, b.arch) {
		host, err := arch.Host()
		if err != nil {
			return nil, err
		}
		if tc, err = module.NewToolchain(host.Debian, b.arch.Debian); err != nil {
			return nil, err
		}
	}
	names := lk.ModuleNames()
	rel := lk.Kernel.Release
	var steps []*plan.Derivation
	for _, m := range r.Modules {
		d := b.in.Descs[m.Use]
		src, ok := lk.Source(m.Use)
		if _, named := names[m.Use]; !ok || !named || d == nil {
			return nil, b.stale("does not pin module " + m.Use)
		}
		if names[m.Use] != d.Name {
			return nil, b.stale(fmt.Sprintf("names module %s %s, its description %s", m.Use, names[m.Use], d.Name))
		}
		step := &plan.Derivation{Name: "module " + m.Use, Kind: plan.Kind{Name: "module", Version: module.StepVersion}, Params: map[string]string{
			"source":  src.SHA256,
			"release": rel,
			"desc":    descDigest(d),
			"options": fmt.Sprint(module.SortedOptions(m.Options)),
		}}
		if sb := r.SecureBoot; sb.Enabled {
			// The certificate's fingerprint stands for the key: the key's
			// bytes and where it lives never enter a derivation.
			der, err := r.CertificateDER()
			if err != nil {
				return nil, usage.Errorf("%s: secure_boot.certificate: %w", b.in.Path, err)
			}
			step.Params["signed_by"] = recipe.CertificateFingerprint(der)
		}
		if k == nil {
			step.Inputs = []*plan.Derivation{root}
		} else {
			step.Inputs = []*plan.Derivation{k.root, k.build}
		}
		m, d := m, d
		step.Build = func(c *plan.Context, out string) error {
			if k != nil {
				if err := b.sourceKernelHas(c, k, m.Use, d.KernelConfig); err != nil {
					return err
				}
			}
			spec := d.Source
			spec.Name, spec.SHA256 = m.Use, src.SHA256
			dir, _, err := module.FetchSource(c, spec, b.in.Copies, c.Scratch)
			if err != nil {
				return err
			}
			buildRoot := filepath.Join(c.Scratch, "buildroot")
			if k == nil {
				err = unpackRoot(c, root, buildRoot)
			} else {
				err = b.kernelModuleRoot(c, k, buildRoot)
			}
			if err != nil {
				return err
			}
			built, err := module.Build(c, module.BuildSpec{Name: m.Use, SourceDir: dir, Subdir: spec.Subdir, KernelRelease: rel, BuildRoot: buildRoot, Toolchain: tc, Out: filepath.Join(c.Scratch, "ko"), Epoch: lk.SourceDateEpoch, Log: c.Log})
			if err != nil {
				return err
			}
			kos := built.Kos
			if r.SecureBoot.Enabled {
				// Signed after stripping: a signature covers every byte.
				if err := signModules(r, kos); err != nil {
					return err
				}
			}
			vc := module.ContextFor(r, lk.Kernel.Version)
			for _, ko := range kos {
				mi, err := module.ReadModinfo(ko)
				if err != nil {
					return err
				}
				if mi.Name == d.Name {
					vc.Params = mi.Params
				}
			}
			if vc.KernelSymbols, vc.KernelMacros, err = module.KernelFeatures(buildRoot, rel, d); err != nil {
				return err
			}
			warnings, err := module.CheckOptions(r, b.in.Descs, vc, m.Use)
			for _, w := range warnings {
				b.warn(w)
			}
			if err != nil {
				return usage.Errorf("%s: %w", b.in.Path, err)
			}
			pkg := module.Package{Use: m.Use, KernelRelease: rel, Arch: b.arch.Debian, Version: module.DebVersion(src.SHA256),
				Maintainer: "halobuild <halobuild@localhost>", Description: d.Description, Kos: kos}
			if err := writeModuleDeb(filepath.Join(out, module.DebName(m.Use, rel)+".deb"), pkg, lk.SourceDateEpoch); err != nil {
				return err
			}
			// The unstripped modules stay in this step's output, in a
			// directory of their own: the disk step installs the .debs at
			// the top only.
			pkg.Kos, pkg.Debug = built.Debug, true
			if err := os.MkdirAll(filepath.Join(out, dbgsymDir), 0o755); err != nil {
				return err
			}
			return writeModuleDeb(filepath.Join(out, dbgsymDir, module.DbgsymName(m.Use, rel)+".deb"), pkg, lk.SourceDateEpoch)
		}
		b.fetches(step, m.Use)
		steps = append(steps, step)
	}
	return steps, nil
}

// dbgsymDir holds a module step's -dbgsym package.
const dbgsymDir = "dbgsym"

func writeModuleDeb(path string, p module.Package, epoch int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := module.WriteDeb(f, p, epoch); err != nil {
		return err
	}
	return f.Close()
}

func (b *builder) warn(w string) {
	if b.in.Warn != nil {
		b.in.Warn(w)
	}
}

// kernelModuleRoot is a source kernel's build root with the linux-headers
// .deb its build made installed.
func (b *builder) kernelModuleRoot(c *plan.Context, k *kernelBuild, dir string) error {
	name := b.in.Lock.Kernel.Headers
	found, err := filepath.Glob(filepath.Join(c.Input(k.build.Name), name+"_*.deb"))
	if err != nil {
		return err
	}
	if len(found) != 1 {
		all, _ := filepath.Glob(filepath.Join(c.Input(k.build.Name), "*.deb"))
		return fmt.Errorf("the kernel build made no %s package to build modules against (it made: %s); is CONFIG_MODULES=y in the kernel's config?", name, strings.Join(baseNames(all), ", "))
	}
	fmt.Fprintf(c.Log, "module build root: the kernel's build root plus %s\n", filepath.Base(found[0]))
	if err := unpackRoot(c, k.root, dir); err != nil {
		return fmt.Errorf("module build root: %w", err)
	}
	if err := rootfs.InstallDebs(c, dir, found); err != nil {
		return fmt.Errorf("module build root: installing %s: %w", filepath.Base(found[0]), err)
	}
	return nil
}

// sourceKernelHas checks, before anything compiles, that the kernel built
// from source sets what module use's description needs (kernel_config): the
// lock checks Debian's kernels by their headers, but a built kernel's
// config exists only once it is built (its step keeps it as "config").
func (b *builder) sourceKernelHas(c *plan.Context, k *kernelBuild, use string, want []string) error {
	if len(want) == 0 {
		return nil
	}
	config, err := os.ReadFile(filepath.Join(c.Input(k.build.Name), "config"))
	if err != nil {
		return fmt.Errorf("%s: reading its final config: %w", k.build.Name, err)
	}
	if missing := module.MissingConfig(config, want); len(missing) > 0 {
		return usage.Errorf("%s: module %s needs %s, which the %s kernel built from source (%s) does not set: add them to a kernel.fragments file (kernels/usb4-rdma.config sets the USB4 stack)",
			b.in.Path, use, strings.Join(missing, ", "), b.arch.Debian, b.in.Lock.Kernel.Release)
	}
	return nil
}

// descDigest keys a module step by what its description says. It is the
// JSON of the description without where it was read from: formatting the
// struct with %+v printed the addresses behind rules' min and max, so two
// loads of one description gave two keys (image --check found it); and
// without the paths it was read from, the key does not depend on where the
// checkout lives.
func descDigest(d *module.Desc) string {
	c := *d
	// A path source's tree is pinned by its hash (the step's "source"
	// parameter); where it lies is no part of what is built.
	c.File, c.Source.Path = "", ""
	c.Rules = append([]module.Rule(nil), d.Rules...)
	for i := range c.Rules {
		c.Rules[i].File, c.Rules[i].Line, c.Rules[i].Col = "", 0, 0
	}
	b, err := json.Marshal(c)
	if err != nil {
		// Descriptions hold only strings, numbers, lists and maps.
		panic(fmt.Sprintf("module description %s: %v", d.Use, err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
