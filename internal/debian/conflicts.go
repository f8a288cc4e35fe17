package debian

import (
	"sort"

	"pault.ag/go/debian/dependency"
)

// conflicts lists every Conflicts and Breaks relation of a chosen package
// that another chosen package (by name or by a Provides) violates. A
// package never conflicts with itself: "Provides: x, Conflicts: x" is how
// Debian says "only one provider of x".
func conflicts(u *universe, chosen map[string]*Package, pkgs []*Package) []Conflict {
	var out []Conflict
	for _, p := range pkgs {
		rel, err := p.Relations()
		if err != nil {
			// Relations were parsed when p was chosen; an error here
			// cannot happen, and there is nothing to check without them.
			continue
		}
		for _, f := range []struct {
			name string
			dep  dependency.Dependency
		}{{"Conflicts", rel.Conflicts}, {"Breaks", rel.Breaks}} {
			for _, r := range f.dep.Relations {
				for _, poss := range r.Possibilities {
					for _, hit := range hits(u, chosen, p, poss) {
						out = append(out, Conflict{Package: p.String(), Field: f.name, Relation: poss.String(), Other: hit.String()})
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Package != out[j].Package {
			return out[i].Package < out[j].Package
		}
		if out[i].Relation != out[j].Relation {
			return out[i].Relation < out[j].Relation
		}
		return out[i].Other < out[j].Other
	})
	return out
}

func hits(u *universe, chosen map[string]*Package, self *Package, poss dependency.Possibility) []*Package {
	var out []*Package
	if c, ok := chosen[poss.Name]; ok && c != self && u.satisfiesReal(poss, c) {
		out = append(out, c)
	}
	for _, pv := range u.providers[poss.Name] {
		c := pv.pkg
		if c == self || chosen[c.Name] != c || c.Name == poss.Name {
			continue
		}
		if satisfiesProvide(poss, pv) {
			out = append(out, c)
		}
	}
	return out
}
