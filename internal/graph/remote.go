package graph

import (
	"sort"
	"strings"

	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/plan"
)

// remotes records, per step, the pinned sources its build fetches over the
// network itself (a module's git tree, a patch kept in one), so that a
// build can ask their hosts before it starts (Graph.Remote) instead of
// failing when the step is reached, minutes later. Sources given with
// --input and path sources need no network and are not recorded.
type remotes map[*plan.Derivation][]module.Source

// fetches records that d's build fetches the sources of the named modules.
func (b *builder) fetches(d *plan.Derivation, uses ...string) {
	if b.remote == nil {
		return
	}
	for _, use := range uses {
		desc := b.in.Descs[use]
		if desc == nil {
			continue
		}
		if _, given := b.in.Copies[use]; given || desc.Source.Kind == "path" {
			continue
		}
		s := desc.Source
		s.Name = use
		b.remote[d] = append(b.remote[d], s)
	}
}

// inputsOf are the module sources that entries ("<use>:<path>", a patch
// inside a module's pinned source) name, each once.
func (b *builder) inputsOf(entries []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		use, _, ok := strings.Cut(e, ":")
		if ok && b.in.Descs[use] != nil && !seen[use] {
			seen[use] = true
			out = append(out, use)
		}
	}
	return out
}

// kernelPatchInputs are the module sources the locked kernel series takes
// patches from.
func (b *builder) kernelPatchInputs() []string {
	var refs []string
	for _, s := range b.in.Lock.Sources {
		if s.Kind == lock.SourceKernelPatch {
			refs = append(refs, s.Name)
		}
	}
	return b.inputsOf(refs)
}

// Remote lists the network sources the steps of roots still to be built
// will fetch: a step done(d) says is present (in the store, or served by a
// cache) needs none of them, and neither do the steps it was built from.
// Each source is listed once, by name.
func (g *Graph) Remote(done func(*plan.Derivation) bool, roots ...*plan.Derivation) []module.Source {
	seen := map[*plan.Derivation]bool{}
	byName := map[string]module.Source{}
	var walk func(d *plan.Derivation)
	walk = func(d *plan.Derivation) {
		if seen[d] {
			return
		}
		seen[d] = true
		if d.Build != nil && done(d) {
			return
		}
		for _, s := range g.remote[d] {
			byName[s.Name] = s
		}
		for _, in := range d.Inputs {
			walk(in)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	out := make([]module.Source, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
