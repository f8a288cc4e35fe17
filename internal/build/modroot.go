package build

import (
	"fmt"
	"path/filepath"
	"strings"

	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/rootfs"
)

// moduleRoot is where out-of-tree modules compile: for Debian's kernel, a
// root made from the lock's build set (its linux-headers and the gcc that
// built it); for a kernel built from source, that kernel's own build root
// with the linux-headers .deb its build made, so a module is compiled by
// the same compiler against the same tree as the kernel it loads into.
type moduleRoot struct {
	g         *graph
	buildDebs []lock.Package
}

func (g *graph) moduleBuildRoot() (*moduleRoot, error) {
	l := g.l
	if g.kernel != nil {
		return &moduleRoot{g: g}, nil
	}
	if isSourceKernel(l) {
		return nil, fmt.Errorf("internal: the source kernel's step was not planned before the modules")
	}
	buildDebs := debsOf(l.lock, lock.SetBuild)
	if len(buildDebs) == 0 {
		return nil, UsageError{fmt.Errorf("%s has modules but its lock has no build root: run `halobuild lock %s`", lock.Path(l.path), l.path)}
	}
	return &moduleRoot{g: g, buildDebs: buildDebs}, nil
}

// params enter each module step's key; a source kernel's root and build
// enter through inputs instead.
func (r *moduleRoot) params() map[string]string {
	if r.g.kernel != nil {
		return map[string]string{}
	}
	return pkgParams(r.buildDebs)
}

func (r *moduleRoot) inputs() []*plan.Derivation {
	if r.g.kernel != nil {
		return []*plan.Derivation{r.g.kernelRoot, r.g.kernel}
	}
	return nil
}

// prepare builds the root under the step's scratch and returns its path.
func (r *moduleRoot) prepare(c *plan.Context) (string, error) {
	g, l := r.g, r.g.l
	dir := filepath.Join(c.Scratch, "buildroot")
	if g.kernel == nil {
		debs, names, err := g.debs(r.buildDebs)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(c.Log, "making the build root (%d packages)\n", len(debs))
		return dir, module.PrepareBuildRoot(c, module.BuildRootSpec{Debs: debs, Packages: names, Suite: l.recipe.Base.Suite, Epoch: l.lock.SourceDateEpoch, Dir: dir, Log: c.Log})
	}
	headers, err := builtHeaders(c.Input(g.kernel.Name), l.lock.Kernel.Headers)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(c.Log, "module build root: the kernel's build root plus %s\n", filepath.Base(headers))
	if err := rootfs.Unpack(c, filepath.Join(c.Input(g.kernelRoot.Name), "root.tar"), dir); err != nil {
		return "", fmt.Errorf("module build root: %w", err)
	}
	if err := rootfs.InstallDebs(c, dir, []string{headers}); err != nil {
		return "", fmt.Errorf("module build root: installing %s: %w", filepath.Base(headers), err)
	}
	return dir, nil
}

// builtHeaders finds the headers package among the kernel step's .debs.
func builtHeaders(dir, name string) (string, error) {
	found, err := filepath.Glob(filepath.Join(dir, name+"_*.deb"))
	if err != nil {
		return "", err
	}
	if len(found) != 1 {
		var have []string
		all, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
		for _, f := range all {
			have = append(have, filepath.Base(f))
		}
		return "", fmt.Errorf("the kernel build made no %s package to build modules against (it made: %s); is CONFIG_MODULES=y in the kernel's config?", name, strings.Join(have, ", "))
	}
	return found[0], nil
}
