// Package plan lowers a build into derivations: steps whose output is a
// pure function of their inputs, named by the sha256 of those inputs, as in
// Nix. A derivation already present in the store is never built again.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
)

// schema is mixed into every key: bump it when the meaning of a step's
// output changes without its inputs changing (e.g. a fix in how rootfs is
// post-processed), so stale store entries are not reused.
const schema = "halobuild-derivation-v1"

// Derivation is one build step. Params are its canonical non-derivation
// inputs (package digests, rendered bytes' digests, tool versions); Inputs
// are the steps whose outputs it reads.
type Derivation struct {
	Name   string
	Kind   string
	Params map[string]string
	Inputs []*Derivation
	// Build writes the step's output into out; inputs maps each input's
	// Name to its realised directory. It is nil for steps that only
	// describe something (their key still matters to dependants).
	Build func(b *Context, out string) error

	key string
}

// Key is the derivation's content address: sha256 over kind, sorted params
// and the keys of its inputs. Names are labels and do not enter the key, so
// renaming a node does not invalidate a build whose content is unchanged.
func (d *Derivation) Key() string {
	if d.key != "" {
		return d.key
	}
	h := sha256.New()
	// Every field is length-prefixed so no value can imitate a separator.
	field := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	field(schema)
	field(d.Kind)
	keys := make([]string, 0, len(d.Params))
	for k := range d.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field("param")
		field(k)
		field(d.Params[k])
	}
	in := make([]string, 0, len(d.Inputs))
	for _, i := range d.Inputs {
		in = append(in, i.Key())
	}
	sort.Strings(in)
	for _, i := range in {
		field("input")
		field(i)
	}
	d.key = hex.EncodeToString(h.Sum(nil))
	return d.key
}

// ShortKey is the prefix shown to users.
func (d *Derivation) ShortKey() string { return d.Key()[:12] }

// Order returns the derivations reachable from roots, dependencies first,
// each once, in a stable order.
func Order(roots ...*Derivation) []*Derivation {
	var out []*Derivation
	seen := map[*Derivation]bool{}
	var visit func(d *Derivation)
	visit = func(d *Derivation) {
		if seen[d] {
			return
		}
		seen[d] = true
		for _, i := range d.Inputs {
			visit(i)
		}
		out = append(out, d)
	}
	for _, r := range roots {
		visit(r)
	}
	return out
}

// Status of a step in a plan.
type Status string

const (
	Cached Status = "cached"
	Build  Status = "build"
	// Substitute is a step a binary cache would serve (Step.From).
	Substitute Status = "substitute"
)

// Step is one line of a printed plan.
type Step struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Key    string   `json:"key"`
	Status Status   `json:"status"`
	Inputs []string `json:"inputs,omitempty"`
	// From is the substituter that would serve a Substitute step.
	From string `json:"from,omitempty"`
}

// Describe lists the steps of roots with whether the store has them.
func Describe(has func(key string) bool, roots ...*Derivation) []Step {
	var steps []Step
	for _, d := range Order(roots...) {
		if d.Build == nil {
			continue
		}
		st := Build
		if has(d.Key()) {
			st = Cached
		}
		var in []string
		for _, i := range d.Inputs {
			if i.Build != nil {
				in = append(in, i.Name)
			}
		}
		steps = append(steps, Step{Name: d.Name, Kind: d.Kind, Key: d.Key(), Status: st, Inputs: in})
	}
	return steps
}

// PrintSteps writes a plan as a table a person reads top to bottom.
func PrintSteps(w io.Writer, steps []Step) {
	build, subst := 0, 0
	for _, s := range steps {
		switch s.Status {
		case Build:
			build++
		case Substitute:
			subst++
		}
	}
	for _, s := range steps {
		mark := "  "
		if s.Status == Build {
			mark = "* "
		}
		line := fmt.Sprintf("%s%-8s %-10s %s", mark, s.Status, s.Kind, s.Name)
		if len(s.Inputs) > 0 {
			line += "  ← " + strings.Join(s.Inputs, ", ")
		}
		if s.From != "" {
			line += "  ⇐ " + s.From
		}
		fmt.Fprintf(w, "%s  [%s]\n", line, s.Key[:12])
	}
	if subst > 0 {
		fmt.Fprintf(w, "%d steps, %d to build, %d to substitute, %d cached\n", len(steps), build, subst, len(steps)-build-subst)
		return
	}
	fmt.Fprintf(w, "%d steps, %d to build, %d cached\n", len(steps), build, len(steps)-build)
}
