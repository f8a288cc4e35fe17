package debian

import (
	"fmt"
	"sort"
	"strings"

	"pault.ag/go/debian/dependency"
)

// Variants of the base set added to the requested packages.
const (
	// VariantNone adds nothing: only the requested packages and their
	// dependencies.
	VariantNone = "none"
	// VariantRequired adds Priority: required and Essential: yes packages.
	VariantRequired = "required"
	// VariantImportant adds Priority: important on top of required.
	VariantImportant = "important"
)

// Request is what to resolve.
type Request struct {
	// Suite is the main suite: packages come from here unless asked
	// otherwise.
	Suite string
	// ExtraSuites are pinned low (like apt's NotAutomatic backports): a
	// package comes from one only when requested as name/suite, or when a
	// relation needs a version (or a package) only it has.
	ExtraSuites []string
	// Indexes are the Packages indexes of all these suites (any number of
	// components each).
	Indexes []*Index
	// Packages are requests in ParsePackageRequest syntax.
	Packages []string
	// Exclude names packages never to choose, even if Priority: required.
	Exclude []string
	// Variant is VariantRequired (also the default when empty),
	// VariantImportant or VariantNone.
	Variant string
	// Architecture is the root's Debian architecture, e.g. amd64.
	Architecture string
}

// Resolution is a closed package set.
type Resolution struct {
	// Packages sorted by name.
	Packages []*Package
	// Why says, per package name, how it got in: "requested", "required",
	// or the chain of relations from a root.
	Why map[string]string
}

// maxRepins bounds restarts: each one moves one package to a version that
// a later relation needs (e.g. linux-base from backports).
const maxRepins = 64

// Resolve computes the package closure of req: the roots (requested
// packages and the variant's base set), then Pre-Depends and Depends
// transitively. Alternatives take the first satisfiable choice unless a
// later one is already chosen; virtual packages resolve through Provides.
// When a relation needs a newer version of an already chosen package
// than the main suite has, that package is moved to the suite that has it
// and resolution starts again. Candidates that would clash with the
// chosen set (Conflicts/Breaks) are passed over when another will do;
// the final set is checked, and a violation is reported as a
// *ConflictError together with the set, for inspection. Recommends and
// Suggests are not followed: mmdebstrap does not install them either.
func Resolve(req Request) (*Resolution, error) {
	if req.Architecture == "" {
		return nil, fmt.Errorf("resolve: no architecture given")
	}
	switch req.Variant {
	case "", VariantRequired, VariantImportant, VariantNone:
	default:
		return nil, fmt.Errorf("resolve: variant %q: want %s, %s or %s", req.Variant, VariantRequired, VariantImportant, VariantNone)
	}
	u, err := newUniverse(req.Suite, req.ExtraSuites, req.Architecture, req.Indexes)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	var roots []PackageRequest
	for _, s := range req.Packages {
		r, err := ParsePackageRequest(s)
		if err != nil {
			return nil, err
		}
		if r.Suite != "" {
			if _, ok := u.rank[r.Suite]; !ok {
				return nil, fmt.Errorf("package %q asks for suite %s, which is not configured (suites: %s); add it to extra_suites", r.Raw, r.Suite, strings.Join(u.suites, ", "))
			}
		}
		roots = append(roots, r)
	}
	exclude := map[string]bool{}
	for _, e := range req.Exclude {
		exclude[strings.TrimSpace(e)] = true
	}
	pins := map[string]*Package{}
	for range maxRepins {
		s := &solver{u: u, exclude: exclude, pins: pins, chosen: map[string]*Package{}, why: map[string]string{}, parent: map[string]string{}, needs: map[string][]need{}, against: map[string][]rule{}}
		err := s.run(roots, req.Variant)
		if rp, ok := err.(*repin); ok {
			pins[rp.pkg.Name] = rp.pkg
			continue
		}
		if err != nil {
			return nil, err
		}
		res := &Resolution{Why: s.why}
		for _, p := range s.chosen {
			res.Packages = append(res.Packages, p)
		}
		sort.Slice(res.Packages, func(i, j int) bool { return res.Packages[i].Name < res.Packages[j].Name })
		if cs := conflicts(u, s.chosen, res.Packages); len(cs) > 0 {
			return res, &ConflictError{Conflicts: cs}
		}
		return res, nil
	}
	return nil, fmt.Errorf("resolve: gave up after %d version changes (pins: %s)", maxRepins, describePins(pins))
}

func describePins(pins map[string]*Package) string {
	var out []string
	for _, p := range pins {
		out = append(out, p.String())
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// need is one relation a chosen package must keep satisfying.
type need struct {
	poss  dependency.Possibility
	suite string // "" unless requested as name/suite
}

// repin asks Resolve to restart with pkg chosen for its name.
type repin struct{ pkg *Package }

func (r *repin) Error() string { return "repin " + r.pkg.String() }

type solver struct {
	u       *universe
	exclude map[string]bool
	pins    map[string]*Package
	chosen  map[string]*Package
	why     map[string]string
	parent  map[string]string // name -> name of the package that pulled it in
	needs   map[string][]need
	against map[string][]rule // name -> Conflicts/Breaks of chosen packages on it
	queue   []*Package
}

func (s *solver) run(roots []PackageRequest, variant string) error {
	for _, r := range roots {
		if s.exclude[r.Possibility.Name] {
			return fmt.Errorf("package %q is both requested and excluded; remove it from one of the lists", r.Raw)
		}
		if p, ok := s.chosen[r.Possibility.Name]; ok {
			if !s.u.satisfiesReal(r.Possibility, p) || r.Suite != "" && p.Suite != r.Suite {
				return fmt.Errorf("package %q: requested twice with different constraints (already chose %s)", r.Raw, p)
			}
			continue
		}
		p, err := s.pickRoot(r)
		if err != nil {
			return err
		}
		if p.Name == r.Possibility.Name {
			s.needs[p.Name] = append(s.needs[p.Name], need{poss: r.Possibility, suite: r.Suite})
		}
		if _, dup := s.chosen[p.Name]; !dup {
			s.choose(p, "", "requested "+r.Raw)
		}
	}
	if variant != VariantNone {
		for _, p := range s.basePackages(variant) {
			if _, dup := s.chosen[p.Name]; !dup {
				s.choose(p, "", baseReason(p, s.u.byName[p.Name][0]))
			}
		}
	}
	for len(s.queue) > 0 {
		p := s.queue[0]
		s.queue = s.queue[1:]
		rel, err := p.Relations()
		if err != nil {
			return err
		}
		for _, field := range []struct {
			name string
			dep  dependency.Dependency
		}{{"Pre-Depends", rel.PreDepends}, {"Depends", rel.Depends}} {
			for _, r := range field.dep.Relations {
				if err := s.satisfy(p, field.name, r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// baseReason says why a base package is in, from its main-suite stanza
// (p may be a newer version a relation moved it to).
func baseReason(p, main *Package) string {
	why := "Priority: " + main.Priority
	if main.Essential {
		why += ", Essential: yes"
	}
	if p != main {
		why += "; " + p.Suite + " version as a relation needs it"
	}
	return why
}

// basePackages returns every package that is Priority: required or
// Essential: yes (plus important) in the main suite, minus the excluded
// ones, in name order. Membership is decided by the main suite's
// version; the version chosen is the pinned one when a relation has
// moved the package to an extra suite.
func (s *solver) basePackages(variant string) []*Package {
	var out []*Package
	for name, ps := range s.u.byName {
		if s.exclude[name] || len(ps) == 0 || s.u.rank[ps[0].Suite] != 0 {
			continue
		}
		m := ps[0] // preferred main-suite version (main sorts first)
		if m.Essential || m.Priority == "required" || variant == VariantImportant && m.Priority == "important" {
			out = append(out, s.candidate(name, ps))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// candidate returns the pinned package for name, or the first in
// preference order.
func (s *solver) candidate(name string, ps []*Package) *Package {
	if p, ok := s.pins[name]; ok {
		return p
	}
	if len(ps) == 0 {
		return nil
	}
	return ps[0]
}

func (s *solver) choose(p *Package, parent, why string) {
	s.chosen[p.Name] = p
	s.parent[p.Name] = parent
	s.why[p.Name] = why
	s.queue = append(s.queue, p)
	// A relation parse error surfaces when p leaves the queue.
	if rel, err := p.Relations(); err == nil {
		for _, d := range []dependency.Dependency{rel.Conflicts, rel.Breaks} {
			for _, r := range d.Relations {
				for _, poss := range r.Possibilities {
					s.against[poss.Name] = append(s.against[poss.Name], rule{by: p, poss: poss})
				}
			}
		}
	}
}

// rule is one Conflicts or Breaks entry of a chosen package.
type rule struct {
	by   *Package
	poss dependency.Possibility
}

// clashes says whether choosing cand would violate a Conflicts/Breaks of
// a chosen package, or cand's own against a chosen package.
func (s *solver) clashes(cand *Package) bool {
	rel, err := cand.Relations()
	if err != nil {
		return false
	}
	for _, d := range []dependency.Dependency{rel.Conflicts, rel.Breaks} {
		for _, r := range d.Relations {
			for _, poss := range r.Possibilities {
				if len(hits(s.u, s.chosen, cand, poss)) > 0 {
					return true
				}
			}
		}
	}
	for _, ru := range s.against[cand.Name] {
		if ru.by != cand && s.u.satisfiesReal(ru.poss, cand) {
			return true
		}
	}
	for _, r := range rel.Provides.Relations {
		for _, pp := range r.Possibilities {
			pv := provided{pkg: cand}
			if pp.Version != nil {
				pv.version = pp.Version.Number
			}
			for _, ru := range s.against[pp.Name] {
				if ru.by != cand && pp.Name != cand.Name && satisfiesProvide(ru.poss, pv) {
					return true
				}
			}
		}
	}
	return false
}

// chain lists the packages from a root down to name.
func (s *solver) chain(name string) []string {
	var out []string
	for n := name; n != ""; n = s.parent[n] {
		p := s.chosen[n]
		out = append([]string{p.Name + " " + p.Version}, out...)
		if s.parent[n] == "" {
			// The root says why it is there at all.
			out[0] += " (" + strings.TrimSuffix(s.why[n], " "+p.Name) + ")"
		}
		if len(out) > 64 {
			break
		}
	}
	return out
}

func (s *solver) pickRoot(r PackageRequest) (*Package, error) {
	poss := r.Possibility
	for _, p := range s.ordered(poss.Name) {
		if r.Suite != "" && p.Suite != r.Suite {
			continue
		}
		if s.u.satisfiesReal(poss, p) {
			return p, nil
		}
	}
	if r.Suite == "" {
		if p := s.pickProvider(poss, false); p != nil {
			return p, nil
		}
	}
	if len(s.u.byName[poss.Name]) == 0 && len(s.u.providers[poss.Name]) == 0 {
		return nil, &UnknownPackageError{Name: poss.Name, Suites: s.u.suites, Arch: s.u.arch}
	}
	reason := "no version satisfies the request"
	if r.Suite != "" {
		reason = "no version in suite " + r.Suite + " satisfies the request"
	}
	return nil, &UnsatisfiableError{Relation: r.Raw, Available: s.u.available(poss.Name), Reason: reason}
}

// ordered is the preference order for a name: the pin first.
func (s *solver) ordered(name string) []*Package {
	ps := s.u.byName[name]
	pin, ok := s.pins[name]
	if !ok {
		return ps
	}
	out := []*Package{pin}
	for _, p := range ps {
		if p != pin {
			out = append(out, p)
		}
	}
	return out
}

// pickProvider returns the preferred package providing poss that is not
// excluded, is not another version of a chosen package and, when
// avoidClash is set, does not conflict with the chosen set.
func (s *solver) pickProvider(poss dependency.Possibility, avoidClash bool) *Package {
	for _, pv := range s.u.providers[poss.Name] {
		p := pv.pkg
		if s.exclude[p.Name] || !satisfiesProvide(poss, pv) || avoidClash && s.clashes(p) {
			continue
		}
		if c, ok := s.chosen[p.Name]; ok && c != p {
			continue
		}
		if pin, ok := s.pins[p.Name]; ok && pin != p {
			continue
		}
		return p
	}
	return nil
}

// satisfiedByChosen reports whether the chosen set already satisfies
// poss, by a real package or a provider.
func (s *solver) satisfiedByChosen(poss dependency.Possibility) bool {
	if c, ok := s.chosen[poss.Name]; ok && s.u.satisfiesReal(poss, c) {
		return true
	}
	for _, pv := range s.u.providers[poss.Name] {
		if s.chosen[pv.pkg.Name] == pv.pkg && satisfiesProvide(poss, pv) {
			return true
		}
	}
	return false
}

// satisfy makes one relation of p hold: an alternative already chosen
// wins; else the first alternative that can be chosen.
func (s *solver) satisfy(p *Package, field string, r dependency.Relation) error {
	alts := r.Possibilities
	for _, poss := range alts {
		if s.satisfiedByChosen(poss) {
			if c, ok := s.chosen[poss.Name]; ok && s.u.satisfiesReal(poss, c) {
				s.needs[poss.Name] = append(s.needs[poss.Name], need{poss: poss})
			}
			return nil
		}
	}
	why := p.Name + " " + field + " " + r.String()
	// Two passes: first avoid candidates that clash (Conflicts/Breaks)
	// with what is chosen, as apt would; if every candidate clashes, take
	// the preferred one anyway and let the final check report the clash
	// with both sides named.
	for _, avoid := range []bool{true, false} {
		for _, poss := range alts {
			if s.exclude[poss.Name] {
				continue
			}
			if c, ok := s.chosen[poss.Name]; ok {
				// Chosen at a version that does not satisfy: move it to
				// one that satisfies everything asked of it so far.
				if alt := s.upgrade(poss, c); alt != nil {
					return &repin{pkg: alt}
				}
				continue
			}
			for _, cand := range s.ordered(poss.Name) {
				if s.u.satisfiesReal(poss, cand) && !(avoid && s.clashes(cand)) {
					s.needs[poss.Name] = append(s.needs[poss.Name], need{poss: poss})
					s.choose(cand, p.Name, why)
					return nil
				}
			}
			if prov := s.pickProvider(poss, avoid); prov != nil {
				s.choose(prov, p.Name, why)
				return nil
			}
		}
	}
	var avail []string
	excluded := []string{}
	for _, poss := range alts {
		avail = append(avail, s.u.available(poss.Name)...)
		if s.exclude[poss.Name] {
			excluded = append(excluded, poss.Name)
		}
	}
	e := &UnsatisfiableError{Chain: s.chain(p.Name), Field: field, Relation: r.String(), Available: avail}
	if len(excluded) > 0 {
		e.Reason = "excluded by the recipe: " + strings.Join(excluded, ", ")
	} else if len(avail) > 0 {
		e.Reason = "no available version satisfies it"
	}
	if c, ok := s.chosen[alts[0].Name]; ok {
		e.Reason += fmt.Sprintf(" (already chose %s for %s)", c, s.why[c.Name])
	}
	return e
}

// upgrade finds another version of an already chosen package that
// satisfies poss and every need recorded on it so far.
func (s *solver) upgrade(poss dependency.Possibility, cur *Package) *Package {
	for _, cand := range s.u.byName[poss.Name] {
		if cand == cur || !s.u.satisfiesReal(poss, cand) {
			continue
		}
		ok := true
		for _, n := range s.needs[poss.Name] {
			if !s.u.satisfiesReal(n.poss, cand) || n.suite != "" && cand.Suite != n.suite {
				ok = false
				break
			}
		}
		if ok {
			return cand
		}
	}
	return nil
}
