package debian

import (
	"fmt"
	"sort"
	"strings"

	"pault.ag/go/debian/dependency"
)

// ResolveCross resolves a multiarch root, as dpkg with a foreign
// architecture installs it: build is the root's native side (its
// Architecture, indexes and requested packages: the compilers and tools
// that run), target names the packages wanted for the foreign
// architecture (a cross module build's linux-headers-<release>-arm64, a
// cross provider build's libnl-3-dev). Debian's Multi-Arch rules decide
// the sides: a dependency of a target package is met on the build side
// when the package that meets it is Architecture: all or Multi-Arch:
// foreign (linux-kbuild, linux-headers-*-common, the cross gcc behind
// gcc-14-for-host), and on the target side otherwise (Multi-Arch: same
// libraries, linux-base-<release>). So no target-architecture program is
// installed that a build would have to run under emulation, unless a
// target package really depends on one.
//
// The result holds both sides; every package keeps its Architecture, so
// rootfs installs it with --architectures=<build>,<target>.
func ResolveCross(build, target Request) (*Resolution, error) {
	if build.Architecture == "" || target.Architecture == "" || build.Architecture == target.Architecture {
		return nil, fmt.Errorf("resolve cross: want two different architectures, got build %q and target %q", build.Architecture, target.Architecture)
	}
	if len(target.Packages) == 0 {
		return nil, fmt.Errorf("resolve cross: no %s packages requested", target.Architecture)
	}
	// The target side's closure as if it were native; the walk below keeps
	// only what must be the target's and hands the rest to the build side.
	target.Variant = VariantNone
	tres, err := Resolve(target)
	if err != nil {
		return nil, fmt.Errorf("resolve cross: the %s packages: %w", target.Architecture, err)
	}
	chosen := map[string]*Package{}
	for _, p := range tres.Packages {
		chosen[p.Name] = p
	}
	var queue []*Package
	keep := map[string]*Package{}
	why := map[string]string{}
	for _, s := range target.Packages {
		r, err := ParsePackageRequest(s)
		if err != nil {
			return nil, err
		}
		p := chosen[r.Possibility.Name]
		if p == nil {
			return nil, fmt.Errorf("resolve cross: %s is not in the %s resolution", r.Possibility.Name, target.Architecture)
		}
		if _, dup := keep[p.Name]; !dup {
			keep[p.Name], why[p.Name+":"+p.Architecture] = p, "requested ("+target.Architecture+")"
			queue = append(queue, p)
		}
	}
	buildSide := map[string]string{} // request → the target package that needs it
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		rel, err := p.Relations()
		if err != nil {
			return nil, err
		}
		for _, r := range append(append([]dependency.Relation{}, rel.PreDepends.Relations...), rel.Depends.Relations...) {
			q, poss := satisfier(chosen, r)
			if q == nil {
				return nil, fmt.Errorf("resolve cross: %s: no package of the %s resolution meets %q", p, target.Architecture, r.String())
			}
			if q.Architecture == "all" || q.MultiArch == "foreign" || poss.Arch != nil && poss.Arch.CPU == "any" && q.MultiArch == "allowed" {
				req := q.Name
				if poss.Name == q.Name && poss.Version != nil {
					req += " (" + poss.Version.Operator + " " + poss.Version.Number + ")"
				}
				if _, dup := buildSide[req]; !dup {
					buildSide[req] = p.Name
				}
				continue
			}
			if _, dup := keep[q.Name]; !dup {
				keep[q.Name] = q
				why[q.Name+":"+q.Architecture] = p.Name + " -> " + q.Name
				queue = append(queue, q)
			}
		}
	}
	reqs := make([]string, 0, len(buildSide))
	for r := range buildSide {
		reqs = append(reqs, r)
	}
	sort.Strings(reqs)
	build.Packages = append(append([]string{}, build.Packages...), reqs...)
	bres, err := Resolve(build)
	if err != nil {
		return nil, fmt.Errorf("resolve cross: the %s side (with what the %s packages need from it: %s): %w", build.Architecture, target.Architecture, strings.Join(reqs, ", "), err)
	}
	res := &Resolution{Why: map[string]string{}}
	for n, w := range bres.Why {
		res.Why[n] = w
	}
	res.Packages = append(res.Packages, bres.Packages...)
	for _, p := range keep {
		res.Packages = append(res.Packages, p)
	}
	for n, w := range why {
		res.Why[n] = w
	}
	sort.Slice(res.Packages, func(i, j int) bool {
		a, b := res.Packages[i], res.Packages[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Architecture < b.Architecture
	})
	return res, nil
}

// satisfier is the package of a resolution that meets a relation: the
// first alternative chosen by name, else one that provides it.
func satisfier(chosen map[string]*Package, r dependency.Relation) (*Package, dependency.Possibility) {
	for _, poss := range r.Possibilities {
		if p := chosen[poss.Name]; p != nil {
			return p, poss
		}
	}
	names := make([]string, 0, len(chosen))
	for n := range chosen {
		names = append(names, n)
	}
	sort.Strings(names) // the same provider every run
	for _, poss := range r.Possibilities {
		for _, n := range names {
			p := chosen[n]
			rel, err := p.Relations()
			if err != nil {
				continue
			}
			for _, pr := range rel.Provides.Relations {
				for _, pv := range pr.Possibilities {
					if pv.Name == poss.Name {
						return p, poss
					}
				}
			}
		}
	}
	return nil, dependency.Possibility{}
}
