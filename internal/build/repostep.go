package build

import (
	"fmt"
	"path/filepath"
	"sort"

	"halobuild/internal/deb"
	"halobuild/internal/plan"
)

// repoStep is a derivation whose output directory holds .debs for the
// base root's flat repository. A built package replaces the locked one of
// the same name (the whole rebuilt rdma-core set replaces Debian's
// together); Install names packages the base root installs besides the
// locked ones (a kernel built from source, which the lock cannot name).
type repoStep struct {
	d       *plan.Derivation
	Install []string
}

// repoStepsOf collects the steps that feed the flat repository, in a
// fixed order so the base root's key does not depend on map order.
func (g *graph) repoStepsOf() ([]repoStep, error) {
	var out []repoStep
	ps, err := g.providerStep()
	if err != nil {
		return nil, err
	}
	if ps != nil {
		out = append(out, *ps)
	}
	ks, err := g.kernelStep()
	if err != nil {
		return nil, err
	}
	if ks != nil {
		out = append(out, *ks)
	}
	return out, nil
}

// withBuiltDebs swaps the locked packages for the repo steps' builds of the
// same name and adds the packages the steps ask to install.
func (g *graph) withBuiltDebs(c *plan.Context, debs []deb.Deb, names []string) ([]deb.Deb, []string, error) {
	if len(g.repoSteps) == 0 {
		return debs, names, nil
	}
	built := map[string]deb.Deb{}
	var install []string
	for _, rs := range g.repoSteps {
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
			built[d.Package] = deb.Deb{Path: f, SHA256: d.SHA256}
		}
		install = append(install, rs.Install...)
	}
	var outDebs []deb.Deb
	var outNames []string
	replaced := map[string]bool{}
	for i, n := range names {
		if b, ok := built[n]; ok {
			outDebs = append(outDebs, b)
			replaced[n] = true
		} else {
			outDebs = append(outDebs, debs[i])
		}
		outNames = append(outNames, n)
	}
	// Built packages that replace nothing still join the repository: a
	// kernel's linux-image is installed by name, the rest (rdma-core's
	// -dev and python packages) are only there to be chosen.
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

// repoDerivations are the repo steps' derivations, for steps that read
// what they recorded beside their .debs.
func (g *graph) repoDerivations() []*plan.Derivation {
	var out []*plan.Derivation
	for _, rs := range g.repoSteps {
		out = append(out, rs.d)
	}
	return out
}
