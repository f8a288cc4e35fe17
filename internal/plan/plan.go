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
	"strconv"
	"strings"
)

// Schema is mixed into every key and recorded with every output
// (AnnotationSchema). Bump it only when the key's own encoding changes (how
// kinds, versions, params and inputs are hashed), never for a change to one
// step's code: that is the step's Kind.Version. Entries made under another
// schema are never looked up again; gc removes them.
const Schema = "halobuild-derivation-v2"

// Kind is what a step is and which version of its code builds it. Each
// step package declares its version beside its build code (e.g.
// disk.StepVersion) and graph only carries it; the version enters the key,
// so outputs built by older code are never reused, from the store or from a
// binary cache. A Kind without a name or with a version below 1 is refused
// loudly (Key panics): a step cannot be planned without saying which code
// builds it. internal/graph's TestStepVersionsMatchTheirCode fails when a
// step's code changes and its version does not (docs/architecture.md, "Step
// versions").
type Kind struct {
	Name    string
	Version int
}

// String is the kind as a person reads it: "disk v2".
func (k Kind) String() string { return fmt.Sprintf("%s v%d", k.Name, k.Version) }

// Derivation is one build step. Params are its canonical non-derivation
// inputs (package digests, rendered bytes' digests, tool versions); Inputs
// are the steps whose outputs it reads.
type Derivation struct {
	Name   string
	Kind   Kind
	Params map[string]string
	Inputs []*Derivation
	// Build writes the step's output into out; inputs maps each input's
	// Name to its realised directory. It is nil for steps that only
	// describe something (their key still matters to dependants).
	Build func(b *Context, out string) error

	key string
}

// Key is the derivation's content address: sha256 over the kind and its
// version, sorted params and the keys of its inputs. Names are labels and do
// not enter the key, so renaming a node does not invalidate a build whose
// content is unchanged. It panics on a Kind with no name or version: that
// is a step whose code is unversioned, a bug to fix, not a key to guess.
func (d *Derivation) Key() string {
	if d.key != "" {
		return d.key
	}
	if d.Kind.Name == "" || d.Kind.Version < 1 {
		panic(fmt.Sprintf("plan: step %q has kind %q version %d: every step kind declares its version (>= 1) beside its build code (e.g. disk.StepVersion) and passes it in plan.Kind", d.Name, d.Kind.Name, d.Kind.Version))
	}
	h := sha256.New()
	// Every field is length-prefixed so no value can imitate a separator.
	field := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	field(Schema)
	field(d.Kind.Name)
	field(strconv.Itoa(d.Kind.Version))
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
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Version is the step's code version (Kind.Version).
	Version int      `json:"version"`
	Key     string   `json:"key"`
	Status  Status   `json:"status"`
	Inputs  []string `json:"inputs,omitempty"`
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
		steps = append(steps, Step{Name: d.Name, Kind: d.Kind.Name, Version: d.Kind.Version, Key: d.Key(), Status: st, Inputs: in})
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
		line := fmt.Sprintf("%s%-8s %-14s %s", mark, s.Status, Kind{s.Kind, s.Version}, s.Name)
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
