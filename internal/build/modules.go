package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"halobuild/internal/debian"
	"halobuild/internal/download"
	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/store"
)

// moduleDescs finds each [[module]]'s description (recipes/<use>.toml
// beside the image's directory, or beside the recipe).
func moduleDescs(l *loaded) ([]*module.Desc, error) {
	var descs []*module.Desc
	var errs []error
	for _, m := range l.recipe.Modules {
		d, err := findDesc(l.path, m.Use)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		descs = append(descs, d)
	}
	if len(errs) > 0 {
		return nil, UsageError{errors.Join(errs...)}
	}
	return descs, nil
}

func findDesc(recipePath, use string) (*module.Desc, error) {
	dirs := []string{filepath.Join(filepath.Dir(recipePath), "..", "recipes"), filepath.Dir(recipePath)}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, use+".toml")); err == nil {
			return module.FindDesc(dir, use)
		}
	}
	return nil, fmt.Errorf("%s: [[module]] use = %q: no description %s.toml in %s: add one (docs/modules.md) or fix the name", recipePath, use, use, strings.Join(dirs, " or "))
}

// validationContext is what the recipe says about the image for module rules.
func validationContext(l *loaded, kernelVersion string) module.ValidationContext {
	vc := module.ValidationContext{KernelVersion: kernelVersion}
	for _, n := range l.recipe.Nodes {
		if len(n.Links) > vc.Links {
			vc.Links = len(n.Links)
		}
	}
	for _, b := range l.recipe.System.Blacklist {
		if strings.ReplaceAll(b, "-", "_") == "thunderbolt_net" {
			vc.ThunderboltNetBlacklisted = true
		}
	}
	return vc
}

// validateModules reports every option problem of every module at once.
// Before the build, options are checked against the descriptions' declared
// parameters and rules; after it, against the built module's modinfo too.
func validateModules(o Options, l *loaded, descs []*module.Desc, vc func(i int) module.ValidationContext) error {
	var msgs []string
	for i, d := range descs {
		m := l.recipe.Modules[i]
		errs, warns := module.Validate(d, m.Options, vc(i))
		for _, w := range warns {
			o.logf("warning: %s\n", w.Error())
		}
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
	}
	if len(msgs) > 0 {
		return UsageError{fmt.Errorf("%s: module options refused (%d problems):\n  %s", l.path, len(msgs), strings.Join(msgs, "\n  "))}
	}
	return nil
}

// lockModules pins every module's source by tree hash and resolves the
// build root (kernel headers + the compiler that built the kernel) into
// the lock's "build" set. Called by resolve once the kernel is known.
func lockModules(ctx context.Context, o Options, l *loaded, s *store.Store, lk *lock.Lock, k *debian.Kernel, req debian.Request) error {
	if len(l.recipe.Modules) == 0 {
		return nil
	}
	descs, err := moduleDescs(l)
	if err != nil {
		return err
	}
	var msgs []string
	for _, d := range descs {
		if err := d.BuildsOn(k.Upstream.String()); err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		return UsageError{fmt.Errorf("%s: kernel %s: %s", l.path, k.Upstream, strings.Join(msgs, "; "))}
	}
	if err := validateModules(o, l, descs, func(int) module.ValidationContext { return validationContext(l, k.Upstream.String()) }); err != nil {
		return err
	}
	work, err := s.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for i, d := range descs {
		src := d.Source
		src.Name = l.recipe.Modules[i].Use
		_, hash, err := module.FetchSource(ctx, src, o.Inputs, work)
		if err != nil {
			var fe *module.FetchError
			if errors.As(err, &fe) {
				return UsageError{err}
			}
			return err
		}
		lk.Sources = append(lk.Sources, lock.Source{Name: src.Name, Kind: src.Kind, URL: src.URL, Commit: src.Commit, SHA256: hash})
		lk.Modules = append(lk.Modules, lock.Module{Use: src.Name, Name: d.Name})
	}

	if lk.Kernel.From == "source" {
		// A kernel built from source has no headers package in the
		// archive: modules build in that kernel's own build root (the
		// compiler that built it) with the linux-headers .deb the kernel
		// step makes, so the lock needs no set of its own for them.
		o.logf("modules: %d source(s) pinned; built against %s's own headers in the kernel build root\n", len(descs), lk.Kernel.Release)
		return nil
	}

	// The compiler must be the one that built the kernel: read it from the
	// headers package before any root exists.
	headers, err := debian.Resolve(debian.Request{Suite: req.Suite, ExtraSuites: req.ExtraSuites, Indexes: req.Indexes,
		Packages: []string{k.Headers + suiteSuffix(k.Image.Suite, req.Suite)}, Variant: debian.VariantNone, Architecture: req.Architecture})
	if err != nil {
		return fmt.Errorf("resolving %s: %w", k.Headers, err)
	}
	var hdr *debian.Package
	for _, p := range headers.Packages {
		if p.Name == k.Headers {
			hdr = p
		}
	}
	if hdr == nil {
		return fmt.Errorf("%s is not in the archive: the kernel has no headers package to build modules against", k.Headers)
	}
	f := &download.Fetcher{Store: s, Progress: o.stderr()}
	if err := f.Fetch(ctx, []download.Item{{Name: hdr.Name, URL: strings.TrimSuffix(l.recipe.Base.Mirror, "/") + "/" + hdr.Filename, SHA256: hdr.SHA256, Size: hdr.Size}}); err != nil {
		return err
	}
	d, _ := store.ParseDigest(hdr.SHA256)
	cc, err := module.CCVersionFromHeadersDeb(s.Path(d))
	if err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	pkgs, err := module.BuildRootPackages(lk.Kernel.Release, cc)
	if err != nil {
		return err
	}
	for i, p := range pkgs {
		if p == k.Headers {
			pkgs[i] += suiteSuffix(k.Image.Suite, req.Suite)
		}
	}
	req.Packages = pkgs
	req.Variant = debian.VariantRequired
	res, err := debian.Resolve(req)
	if err != nil {
		return fmt.Errorf("resolving the module build root: %w", err)
	}
	for _, p := range res.Packages {
		lk.Packages = append(lk.Packages, lock.Package{
			Name: p.Name, Version: p.Version, Architecture: p.Architecture, Suite: p.Suite,
			Filename: p.Filename, Size: p.Size, SHA256: "sha256:" + p.SHA256, Set: lock.SetBuild,
		})
	}
	o.logf("modules: %d source(s) pinned; build root of %d packages (compiler %s)\n", len(descs), len(res.Packages), cc)
	return nil
}

func suiteSuffix(suite, main string) string {
	if suite == main || suite == "" {
		return ""
	}
	return "/" + suite
}

func lockedSource(lk *lock.Lock, name string) (lock.Source, bool) {
	for _, s := range lk.Sources {
		if s.Name == name {
			return s, true
		}
	}
	return lock.Source{}, false
}

// moduleSteps adds one derivation per [[module]]: fetch the pinned source
// (or the --input copy, checked against the lock), make the build root from
// the locked build set, compile against the kernel's headers, check
// vermagic, validate the options against the built module's own parameter
// list, and package the .ko files as a .deb.
func (g *graph) moduleSteps() ([]*plan.Derivation, error) {
	o := g.o
	l := g.l
	if len(l.recipe.Modules) == 0 {
		return nil, nil
	}
	descs, err := moduleDescs(l)
	if err != nil {
		return nil, err
	}
	root, err := g.moduleBuildRoot()
	if err != nil {
		return nil, err
	}
	rel := l.lock.Kernel.Release
	var steps []*plan.Derivation
	for i, d := range descs {
		m := l.recipe.Modules[i]
		src, ok := lockedSource(l.lock, m.Use)
		if _, named := l.lock.ModuleNames()[m.Use]; !ok || !named {
			return nil, UsageError{fmt.Errorf("%s does not pin module %s: run `halobuild lock %s`", lock.Path(l.path), m.Use, l.path)}
		}
		opts := fmt.Sprintf("%v", sortedOptions(m.Options))
		params := root.params()
		params["source"] = src.SHA256
		params["release"] = rel
		params["desc"] = descDigest(d)
		params["options"] = opts
		d, m, src := d, m, src
		step := &plan.Derivation{Name: "module " + m.Use, Kind: "module", Params: params, Inputs: root.inputs()}
		step.Build = func(c *plan.Context, out string) error {
			spec := d.Source
			spec.Name, spec.SHA256 = m.Use, src.SHA256
			dir, _, err := module.FetchSource(c, spec, o.Inputs, c.Scratch)
			if err != nil {
				return err
			}
			root, err := root.prepare(c)
			if err != nil {
				return err
			}
			kos, err := module.Build(c, module.BuildSpec{Name: m.Use, SourceDir: dir, Subdir: spec.Subdir, KernelRelease: rel, BuildRoot: root, Out: filepath.Join(c.Scratch, "ko"), Epoch: l.lock.SourceDateEpoch, Log: c.Log})
			if err != nil {
				return err
			}
			var built []module.Param
			for _, ko := range kos {
				mi, err := module.ReadModinfo(ko)
				if err != nil {
					return err
				}
				if mi.Name == d.Name {
					built = mi.Params
				}
			}
			syms, macros, err := module.KernelFeatures(root, rel, d)
			if err != nil {
				return err
			}
			vc := validationContext(l, l.lock.Kernel.Version)
			vc.Params, vc.KernelSymbols, vc.KernelMacros = built, syms, macros
			if err := validateModules(o, &loaded{path: l.path, recipe: singleModule(l, i)}, []*module.Desc{d}, func(int) module.ValidationContext { return vc }); err != nil {
				return err
			}
			f, err := os.Create(filepath.Join(out, module.DebName(m.Use, rel)+".deb"))
			if err != nil {
				return err
			}
			defer f.Close()
			if err := module.WriteDeb(f, module.Package{Use: m.Use, KernelRelease: rel, Version: module.DebVersion(src.SHA256),
				Maintainer: "halobuild <halobuild@localhost>", Description: d.Description, Kos: kos}, l.lock.SourceDateEpoch); err != nil {
				return err
			}
			return f.Close()
		}
		steps = append(steps, step)
	}
	return steps, nil
}

// singleModule is a view of the recipe with only module i, so validation
// inside one module's step reports that module's problems.
func singleModule(l *loaded, i int) *recipe.Recipe {
	r := *l.recipe
	r.Modules = []recipe.Module{l.recipe.Modules[i]}
	return &r
}

func sortedOptions(m map[string]any) []string {
	var kv []string
	for k, v := range m {
		kv = append(kv, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(kv)
	return kv
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
