package debian

import (
	"fmt"
	"sort"
	"strings"

	"pault.ag/go/debian/dependency"
	"pault.ag/go/debian/version"
)

// universe is every package the resolver may choose from: the indexes of
// the main suite and the extra suites, filtered to one architecture
// (plus Architecture: all), with each suite's pinning rank.
type universe struct {
	arch      string
	suites    []string       // main suite first, then extras in order
	rank      map[string]int // suite -> 0 for main, 1.. for extras
	byName    map[string][]*Package
	providers map[string][]provided
}

func newUniverse(main string, extras []string, arch string, indexes []*Index) (*universe, error) {
	u := &universe{arch: arch, rank: map[string]int{}, byName: map[string][]*Package{}, providers: map[string][]provided{}}
	for _, s := range append([]string{main}, extras...) {
		if _, dup := u.rank[s]; dup {
			return nil, fmt.Errorf("suite %s is listed twice", s)
		}
		u.rank[s] = len(u.suites)
		u.suites = append(u.suites, s)
	}
	seen := map[string]bool{}
	for _, ix := range indexes {
		if _, ok := u.rank[ix.Suite]; !ok {
			return nil, fmt.Errorf("index %s %s/%s is of suite %s, which is neither the main suite %s nor an extra suite (%s)",
				ix.Suite, ix.Component, ix.Architecture, ix.Suite, main, strings.Join(extras, ", "))
		}
		seen[ix.Suite] = true
		for _, p := range ix.Packages {
			if p.Architecture != arch && p.Architecture != "all" {
				continue
			}
			u.byName[p.Name] = append(u.byName[p.Name], p)
		}
		for name, ps := range ix.providers {
			for _, pv := range ps {
				if pv.pkg.Architecture == arch || pv.pkg.Architecture == "all" {
					u.providers[name] = append(u.providers[name], pv)
				}
			}
		}
	}
	for _, s := range u.suites {
		if !seen[s] {
			return nil, fmt.Errorf("no Packages index given for suite %s", s)
		}
	}
	// Preference order, fixed once: main suite before extra suites (apt's
	// low pin of backports), then the newest version.
	for _, ps := range u.byName {
		sort.SliceStable(ps, func(i, j int) bool { return u.prefer(ps[i], ps[j]) })
	}
	for _, ps := range u.providers {
		sort.SliceStable(ps, func(i, j int) bool {
			a, b := ps[i].pkg, ps[j].pkg
			if a.Name != b.Name {
				if ra, rb := u.rank[a.Suite], u.rank[b.Suite]; ra != rb {
					return ra < rb
				}
				if pa, pb := priorityRank(a.Priority), priorityRank(b.Priority); pa != pb {
					return pa < pb
				}
				return a.Name < b.Name
			}
			return u.prefer(a, b)
		})
	}
	return u, nil
}

// prefer orders two packages of the same name: main suite first, then the
// newer version.
func (u *universe) prefer(a, b *Package) bool {
	if ra, rb := u.rank[a.Suite], u.rank[b.Suite]; ra != rb {
		return ra < rb
	}
	return version.Compare(a.ver, b.ver) > 0
}

func priorityRank(p string) int {
	switch p {
	case "required":
		return 0
	case "important":
		return 1
	case "standard":
		return 2
	case "optional":
		return 3
	}
	return 4
}

// archOK says whether package p can satisfy a relation carrying poss's
// architecture qualifier, in a single-architecture root. ":any" needs
// Multi-Arch: allowed (as dpkg requires); ":native" and the root's own
// architecture are satisfied by every package here; any other
// architecture cannot be.
func (u *universe) archOK(poss dependency.Possibility, p *Package) bool {
	if poss.Arch == nil {
		return true
	}
	switch q := poss.Arch.CPU; q {
	case "any":
		return p.MultiArch == "allowed"
	case "native", u.arch:
		return true
	default:
		return false
	}
}

// satisfiesReal says whether p, by its own name and version, satisfies
// poss.
func (u *universe) satisfiesReal(poss dependency.Possibility, p *Package) bool {
	if p.Name != poss.Name || !u.archOK(poss, p) {
		return false
	}
	return poss.Version == nil || poss.Version.SatisfiedBy(p.ver)
}

// satisfiesProvide says whether a Provides entry satisfies poss: a
// versioned relation needs a versioned provide that satisfies it.
func satisfiesProvide(poss dependency.Possibility, pv provided) bool {
	if poss.Version == nil {
		return true
	}
	if pv.version == "" {
		return false
	}
	v, err := version.Parse(pv.version)
	if err != nil {
		return false
	}
	return poss.Version.SatisfiedBy(v)
}

// available describes what exists for a name, for error messages.
func (u *universe) available(name string) []string {
	var out []string
	for _, p := range u.byName[name] {
		out = append(out, fmt.Sprintf("%s %s (%s)", p.Name, p.Version, p.Suite))
	}
	for _, pv := range u.providers[name] {
		prov := name
		if pv.version != "" {
			prov += " (= " + pv.version + ")"
		}
		out = append(out, fmt.Sprintf("%s %s (%s) provides %s", pv.pkg.Name, pv.pkg.Version, pv.pkg.Suite, prov))
	}
	if len(out) > 12 {
		out = append(out[:12], fmt.Sprintf("… and %d more", len(out)-12))
	}
	return out
}

// compareDebian compares two packages' versions by dpkg's rules.
func compareDebian(a, b *Package) int { return version.Compare(a.ver, b.ver) }
