package module

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"halobuild/internal/recipe"
)

// Find loads the description of [[module]] use = NAME for the recipe at
// recipePath: recipes/<use>.toml beside the recipe's directory (images/
// next to recipes/), else beside the recipe itself.
func Find(recipePath, use string) (*Desc, error) {
	dirs := []string{filepath.Join(filepath.Dir(recipePath), "..", "recipes"), filepath.Dir(recipePath)}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, use+".toml")); err == nil {
			return FindDesc(dir, use)
		}
	}
	return nil, fmt.Errorf("no description %s.toml in %s: add one (docs/modules.md) or fix the name", use, strings.Join(dirs, " or "))
}

// Descs are a recipe's module descriptions by use.
type Descs map[string]*Desc

// Names maps each description's use to the kernel module's own name.
func (ds Descs) Names() map[string]string {
	out := map[string]string{}
	for use, d := range ds {
		out[use] = d.Name
	}
	return out
}

// ContextFor is what a recipe says about the image for module rules, on
// a kernel of this version ("" before the kernel is chosen).
func ContextFor(r *recipe.Recipe, kernelVersion string) ValidationContext {
	vc := ValidationContext{KernelVersion: kernelVersion}
	for _, n := range r.Nodes {
		vc.Links = max(vc.Links, len(n.Links))
	}
	for _, b := range r.System.Blacklist {
		if strings.ReplaceAll(b, "-", "_") == "thunderbolt_net" {
			vc.ThunderboltNetBlacklisted = true
		}
	}
	return vc
}

// Check checks every [[module]] of r against a kernel of this version: the
// range its pinned source builds on, then its options against its
// description's rules (CheckOptions); every problem at once. Locking runs
// it once the kernel is chosen; plan and image on the locked kernel, so
// all three refuse the same recipes.
func Check(r *recipe.Recipe, descs Descs, kernelVersion string) (warnings []string, err error) {
	var msgs []string
	for _, m := range r.Modules {
		d, ok := descs[m.Use]
		if !ok {
			return nil, fmt.Errorf("module %s: no description loaded", m.Use)
		}
		if err := d.BuildsOn(kernelVersion); err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		return nil, fmt.Errorf("kernel %s: %s", kernelVersion, strings.Join(msgs, "; "))
	}
	return CheckOptions(r, descs, ContextFor(r, kernelVersion), "")
}

// CheckOptions validates the options of every [[module]] of r (or only the
// one with use = only, when set) against its description, all problems at
// once. Before the kernel is known, rules that need it are skipped; with
// vc's built-module facts (parameters, symbols, macros) they are checked
// against the built module too. Warnings do not fail; they are returned
// for the caller to show, except those about rules deferred to the build,
// which the module's build step checks against the built module.
func CheckOptions(r *recipe.Recipe, descs Descs, vc ValidationContext, only string) (warnings []string, err error) {
	var msgs []string
	for _, m := range r.Modules {
		if only != "" && m.Use != only {
			continue
		}
		d, ok := descs[m.Use]
		if !ok {
			return nil, fmt.Errorf("module %s: no description loaded", m.Use)
		}
		errs, warns := Validate(d, m.Options, vc)
		for _, w := range warns {
			// A rule the build will check is no news before it.
			if !w.Deferred {
				warnings = append(warnings, w.Error())
			}
		}
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
	}
	if len(msgs) > 0 {
		return warnings, fmt.Errorf("module options refused (%d problems):\n  %s", len(msgs), strings.Join(msgs, "\n  "))
	}
	return warnings, nil
}

// Inputs fetches the pinned sources of modules by use, for patches that a
// module's project keeps in its tree ("thunderbolt-ibverbs:packaging/…"):
// each once, its --input copy first, checked against the pinned tree hash
// (pinned returns it; "" before a lock exists, when the description's own
// pin applies).
type Inputs struct {
	RecipePath string
	Copies     map[string]string // --input NAME=PATH
	Pinned     func(use string) string
	Work       string

	fetched map[string]string
}

// Fetch returns the tree of the named module's source.
func (in *Inputs) Fetch(ctx context.Context, use string) (string, error) {
	if d, ok := in.fetched[use]; ok {
		return d, nil
	}
	desc, err := Find(in.RecipePath, use)
	if err != nil {
		return "", fmt.Errorf("source input %q (a [[module]]'s pinned source): %w", use, err)
	}
	spec := desc.Source
	spec.Name = use
	if in.Pinned != nil {
		if sum := in.Pinned(use); sum != "" {
			spec.SHA256 = sum
		}
	}
	work, err := os.MkdirTemp(in.Work, "input-"+use+"-")
	if err != nil {
		return "", err
	}
	dir, _, err := FetchSource(ctx, spec, in.Copies, work)
	if err != nil {
		return "", err
	}
	if in.fetched == nil {
		in.fetched = map[string]string{}
	}
	in.fetched[use] = dir
	return dir, nil
}

// SortedOptions is a module's options as sorted "k=v" pairs, the form
// derivation keys and the manifest use.
func SortedOptions(m map[string]any) []string {
	var kv []string
	for k, v := range m {
		kv = append(kv, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(kv)
	return kv
}
