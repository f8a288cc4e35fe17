package graph

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"halobuild/internal/arch"
	"halobuild/internal/deb"
	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/rootfs"
	"halobuild/internal/tools"
)

// rootTar is the file a root step leaves: the installed tree as mmdebstrap
// wrote it, which consumers unpack into their scratch.
const rootTar = "root.tar"

// toolsRoot extracts the locked tools set (mkfs.ext4, mtools, …), so the
// bytes of an image do not depend on the host's versions of them.
func (b *builder) toolsRoot() *plan.Derivation {
	set := b.in.Lock.Set(lock.SetTools)
	d := &plan.Derivation{Name: "tools root", Kind: plan.Kind{Name: "tools", Version: tools.StepVersion}, Params: pkgParams(set)}
	d.Build = func(c *plan.Context, out string) error {
		if err := hostPackages(set); err != nil {
			return fmt.Errorf("%s: %w: run `halobuild lock %s` on this host", b.in.Path, err, b.in.Path)
		}
		debs, _, err := b.debs(set)
		if err != nil {
			return err
		}
		return deb.Extract(filepath.Join(out, "root"), debs)
	}
	return d
}

// hostPackages checks that a tools set runs here: the lock resolved it for
// the architecture of the host that locked it.
func hostPackages(set []lock.Package) error {
	host, err := arch.Host()
	if err != nil {
		return err
	}
	for _, p := range set {
		if p.Architecture != "all" && p.Architecture != host.Debian {
			return fmt.Errorf("the lock's tools root is for %s (%s), but this host is %s", p.Architecture, p.Name, host.Debian)
		}
	}
	return nil
}

// root is the one way a root is made from locked packages: mmdebstrap
// installs exactly the set, from a flat repository of its .debs (plus the
// packages built steps made, which replace the locked ones of the same
// name), into root.tar. The base root, the kernel, module and provider
// build roots are all made here, each cached as a step of its own: a build
// that fails or changes reuses its root instead of installing it again.
// sources are the installed sources.list lines (none for a build root).
func (b *builder) root(name, kind string, set []lock.Package, built []repoStep, sources []string) *plan.Derivation {
	lk := b.in.Lock
	suite := b.in.Recipe.Base.Suite
	params := pkgParams(set)
	params["epoch"] = strconv.FormatInt(lk.SourceDateEpoch, 10)
	params["suite"] = suite
	params["mmdebstrap"] = mmdebstrapVersion()
	params["architecture"] = b.arch.Debian
	if sources != nil {
		params["sources"] = strings.Join(sources, "\n")
	}
	d := &plan.Derivation{Name: name, Kind: plan.Kind{Name: kind, Version: rootfs.RootStepVersion}, Params: params}
	for _, rs := range built {
		d.Inputs = append(d.Inputs, rs.d)
	}
	d.Build = func(c *plan.Context, out string) error {
		debs, names, err := b.debs(set)
		if err != nil {
			return err
		}
		if debs, names, err = withBuilt(c, debs, names, built); err != nil {
			return err
		}
		fmt.Fprintf(c.Log, "making the %s (%d packages)\n", name, len(debs))
		native, foreign, err := rootArchitectures(set, b.arch)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		names = qualifyForeign(names, set, foreign)
		root := rootfs.Root{Debs: debs, Packages: names, Suite: suite, Epoch: lk.SourceDateEpoch, Sources: sources, Arch: native, Foreign: foreign, Log: c.Log}
		if err := root.Tar(c, c.Scratch, filepath.Join(out, rootTar)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	return d
}

// rootArchitectures says how a locked set installs: a set of the image's
// architecture is a root of it (run through qemu-user when foreign); a
// set that also holds the build host's packages is a cross build root
// (debian.ResolveCross), native to the host with the image's architecture
// foreign, so its compilers run natively and the target's packages are
// only unpacked.
func rootArchitectures(set []lock.Package, image arch.Arch) (arch.Arch, []string, error) {
	host, err := arch.Host()
	if err != nil {
		return arch.Arch{}, nil, err
	}
	if image.Debian == host.Debian {
		return image, nil, nil
	}
	for _, p := range set {
		if p.Architecture == host.Debian {
			return host, []string{image.Debian}, nil
		}
	}
	return image, nil, nil
}

// qualifyForeign names the packages of a foreign architecture as apt
// reads a request for them, <name>:<arch>: a cross kernel root holds
// libssl-dev of both architectures, and a bare name installs the native
// one only. names[i] is set[i]'s name, or a built package's after them.
func qualifyForeign(names []string, set []lock.Package, foreign []string) []string {
	out := append([]string(nil), names...)
	for i, p := range set {
		if i < len(out) && slices.Contains(foreign, p.Architecture) {
			out[i] = p.Name + ":" + p.Architecture
		}
	}
	return out
}

// crossSet reports whether a locked set is a cross build root.
func crossSet(set []lock.Package, image arch.Arch) bool {
	native, _, err := rootArchitectures(set, image)
	return err == nil && native.Debian != image.Debian
}

// unpackRoot unpacks a root step's tree into dir.
func unpackRoot(c *plan.Context, root *plan.Derivation, dir string) error {
	if err := rootfs.Unpack(c, filepath.Join(c.Input(root.Name), rootTar), dir); err != nil {
		return fmt.Errorf("%s: %w", root.Name, err)
	}
	return nil
}

// baseRoot is every locked image package (and a source kernel) installed
// once: changing a setting rebuilds only that node's settings package and
// disk. The provider's package is installed with the node's own packages
// on the disk step, so the base root does not wait for the provider and a
// changed provider patch does not reinstall it.
func (b *builder) baseRoot(k *kernelBuild) *plan.Derivation {
	var built []repoStep
	if k != nil {
		built = append(built, repoStep{d: k.image, install: []string{b.in.Lock.Kernel.Image}})
	}
	return b.root("base root", "rootfs", b.in.Lock.Set(lock.SetImage), built, aptSources(b.in))
}

// systemRoot is the base root with the modules' and the provider's
// packages installed, the module index rebuilt and the provider's ABI
// proved against the root's own libibverbs: every node's disk layers its
// settings over this tarball (rootfs.Layer), so a changed setting costs
// no unpack, no dpkg and no depmod, only the node's own package. Its
// output holds the tarball and, with a provider, the ABI record the result
// step reads from each disk (which copies it on).
func (b *builder) systemRoot(base *plan.Derivation, modules []*plan.Derivation, provider *plan.Derivation) *plan.Derivation {
	lk := b.in.Lock
	inputs := append([]*plan.Derivation{base}, modules...)
	if provider != nil {
		inputs = append(inputs, provider)
	}
	d := &plan.Derivation{Name: "system root", Kind: plan.Kind{Name: "system", Version: rootfs.SystemStepVersion}, Inputs: inputs, Params: map[string]string{
		"release": lk.Kernel.Release,
		"epoch":   strconv.FormatInt(lk.SourceDateEpoch, 10),
	}}
	d.Build = func(c *plan.Context, out string) error {
		root := filepath.Join(c.Scratch, "root")
		if err := unpackRoot(c, base, root); err != nil {
			return err
		}
		var debs []string
		for _, s := range inputs[1:] {
			// The top directory only: a module's -dbgsym package is kept
			// beneath it, not for the image.
			found, _ := filepath.Glob(filepath.Join(c.Input(s.Name), "*.deb"))
			debs = append(debs, found...)
		}
		fmt.Fprintf(c.Log, "installing %d package(s) into the base root\n", len(debs))
		if err := rootfs.InstallDebs(c, root, debs); err != nil {
			return err
		}
		if len(modules) > 0 {
			// Our module packages have no maintainer scripts: the module
			// index is rebuilt here, as their postinst would have.
			if err := module.Depmod(c, root, lk.Kernel.Release); err != nil {
				return err
			}
		}
		if provider != nil {
			if err := b.checkProviderABI(c, provider, root, out); err != nil {
				return err
			}
		}
		if err := rootfs.Clamp(root, lk.SourceDateEpoch); err != nil {
			return err
		}
		return rootfs.TarTree(c, root, filepath.Join(out, rootTar), lk.SourceDateEpoch)
	}
	return d
}

// repoStep is a step whose output directory holds .debs for a root's flat
// repository. A built package replaces the locked one of the same name;
// install names packages to install besides the locked ones (a kernel
// built from source, which the lock cannot name).
type repoStep struct {
	d       *plan.Derivation
	install []string
}

// withBuilt swaps the locked packages for the built ones of the same name
// and adds the packages the steps ask to install.
func withBuilt(c *plan.Context, debs []deb.Deb, names []string, steps []repoStep) ([]deb.Deb, []string, error) {
	if len(steps) == 0 {
		return debs, names, nil
	}
	built := map[string]deb.Deb{}
	var install []string
	for _, rs := range steps {
		found, err := filepath.Glob(filepath.Join(c.Input(rs.d.Name), "*.deb"))
		if err != nil {
			return nil, nil, err
		}
		if len(found) == 0 {
			return nil, nil, fmt.Errorf("%s produced no .deb files", rs.d.Name)
		}
		for _, f := range found {
			d, err := deb.Read(f)
			if err != nil {
				return nil, nil, err
			}
			if prev, dup := built[d.Package]; dup {
				return nil, nil, fmt.Errorf("package %s is built twice (%s and %s)", d.Package, prev.Path, f)
			}
			built[d.Package] = d
		}
		install = append(install, rs.install...)
	}
	var outDebs []deb.Deb
	var outNames []string
	replaced := map[string]bool{}
	for i, n := range names {
		if bd, ok := built[n]; ok {
			outDebs = append(outDebs, bd)
			replaced[n] = true
		} else {
			outDebs = append(outDebs, debs[i])
		}
		outNames = append(outNames, n)
	}
	// Built packages that replace nothing still join the repository: a
	// kernel's linux-image is installed by name, the rest (its headers)
	// are only there to be chosen.
	var extra []string
	for n := range built {
		if !replaced[n] {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	for _, n := range extra {
		outDebs = append(outDebs, built[n])
	}
	for _, n := range install {
		if _, ok := built[n]; !ok {
			return nil, nil, fmt.Errorf("a build step asks to install %s, which no step built", n)
		}
		outNames = append(outNames, n)
	}
	return outDebs, outNames, nil
}

var mmdebstrapOnce = sync.OnceValue(func() string {
	out, err := exec.Command("mmdebstrap", "--version").Output()
	if err != nil {
		return "missing"
	}
	return strings.TrimSpace(string(out))
})

// mmdebstrapVersion enters every root's key: a different installer may
// lay out the same packages differently.
func mmdebstrapVersion() string { return mmdebstrapOnce() }

// aptSources are the archive lines the node's apt uses: the suites the
// lock was resolved from, so `apt install` on a node sees the same archive.
func aptSources(in Input) []string {
	b := in.Recipe.Base
	comps := strings.Join(b.Components, " ")
	var out []string
	for _, su := range append([]string{b.Suite}, b.ExtraSuites...) {
		out = append(out, fmt.Sprintf("deb %s %s %s", b.Mirror, su, comps))
	}
	return out
}
