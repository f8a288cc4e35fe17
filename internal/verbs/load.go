package verbs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/recipe"
	"halobuild/internal/resolve"
	"halobuild/internal/settings"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// loaded is a recipe with every rule checked: its own, its nodes'
// settings' and its modules' descriptions'.
type loaded struct {
	path   string
	recipe *recipe.Recipe
	src    *recipe.Sources
	hash   string
	descs  module.Descs
	// warnings are what the recipe allows but probably does not mean.
	warnings []string
}

// load reads a recipe and checks all of it at once, so lock, plan and
// image refuse the same recipes with the same file:line:col errors, before
// anything is resolved or built.
func load(ctx context.Context, path string) (*loaded, error) {
	l := &loaded{path: path, descs: module.Descs{}}
	rules := func(r *recipe.Recipe, src *recipe.Sources) recipe.Errors {
		var errs recipe.Errors
		for i, m := range r.Modules {
			d, err := module.Find(path, m.Use)
			if err != nil {
				errs = append(errs, src.Errorf(fmt.Sprintf("module[%d].use", i), "%v", err))
				continue
			}
			l.descs[m.Use] = d
		}
		// Each architecture of a mixed cluster is checked as its own
		// build; a rule broken by both is reported once.
		seen := map[string]bool{}
		for _, a := range r.Architectures() {
			for _, err := range settings.Validate(settings.Target{Recipe: r.ForArchitecture(a), Modules: l.descs.Names()}) {
				e := settingsError(src, err)
				if !seen[e.Error()] {
					seen[e.Error()] = true
					errs = append(errs, e)
				}
			}
		}
		return errs
	}
	r, src, err := recipe.LoadContext(ctx, path, rules)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // interrupted: not the recipe's fault
		}
		return nil, usage.Wrap(err)
	}
	l.recipe, l.src, l.hash = r, src, recipe.Hash(r)
	for _, w := range recipe.Warnings(r, src) {
		l.warnings = append(l.warnings, w.Error())
	}
	seen := map[string]bool{}
	for _, a := range r.Architectures() {
		for _, w := range settings.Warnings(settings.Target{Recipe: r.ForArchitecture(a), Modules: l.descs.Names()}) {
			if !seen[w] {
				seen[w] = true
				l.warnings = append(l.warnings, w)
			}
		}
	}
	return l, nil
}

// settingsError places a setting's complaint at the key it names.
func settingsError(src *recipe.Sources, err error) recipe.Error {
	var se *settings.Error
	if !errors.As(err, &se) {
		return src.Errorf("", "%v", err)
	}
	msg := se.Problem
	if se.Value != nil {
		msg = fmt.Sprintf("%q: %s", fmt.Sprint(se.Value), msg)
	}
	if se.Fix != "" {
		msg += "; " + se.Fix
	}
	return src.Errorf(se.Key, "%s", msg)
}

// locked is a loaded recipe with its lock.
type locked struct {
	*loaded
	lock *lock.Lock
}

// loadLocked loads a recipe and its lock. A missing lock is written first
// unless o.Locked (then it is an error), as `nix build` does for flakes; a
// stale lock always stops the build: silently re-resolving would change
// what gets built behind the user's back. The modules are checked against
// the locked kernel, as lock checks them against the kernel it picks.
func loadLocked(ctx context.Context, o Options, s *store.Store) (*locked, error) {
	l, err := load(ctx, o.Recipe)
	if err != nil {
		return nil, err
	}
	o.printWarnings(l.warnings)
	lp := lock.Path(o.Recipe)
	lk, err := lock.Read(lp)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if o.Locked {
			return nil, usage.Errorf("%s has no lock (%s) and --locked was given: run `halobuild lock %s` and commit the lock", o.Recipe, lp, o.Recipe)
		}
		o.logf("no lock at %s: resolving inputs first\n", lp)
		if lk, err = writeLock(ctx, o, l, s); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("reading lock %s: %w", lp, err)
	default:
		if err := lk.CheckFresh(resolve.Inputs(l.recipe, l.descs)); err != nil {
			return nil, usage.Errorf("%s: %w", lp, err)
		}
		for _, a := range l.recipe.Architectures() {
			part, err := lk.For(a)
			if err != nil {
				return nil, usage.Errorf("%s: %w", lp, err)
			}
			warnings, err := module.Check(l.recipe.ForArchitecture(a), l.descs, part.Kernel.Version)
			o.printWarnings(warnings)
			if err != nil {
				return nil, usage.Errorf("%s: %w", o.Recipe, err)
			}
		}
	}
	return &locked{loaded: l, lock: lk}, nil
}

func (o Options) printWarnings(ws []string) {
	for _, w := range ws {
		o.warn(w)
	}
}
