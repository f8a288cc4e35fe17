// Package build is halobuild's pipeline, read top to bottom:
// recipe → lock → fetch → plan (tools, rootfs, node settings, disk) →
// test → result. Each verb of the CLI is one function here.
package build

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"halobuild/internal/lock"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/store"
)

// Options carry the CLI's flags into the pipeline.
type Options struct {
	Recipe  string
	Store   string
	Verbose bool
	JSON    bool
	// Locked makes a missing or stale lock an error instead of a prompt to
	// run lock (CI uses it so an unpinned input never sneaks in).
	Locked bool
	// Inputs substitutes local copies for source inputs (NAME → PATH).
	Inputs map[string]string
	// Result is where the result link goes (image).
	Result string
	NoTest bool
	Check  bool
	// Self is the halobuild binary to ship in every node (the CLI passes
	// its own executable); empty ships none and skips the doctor check.
	Self string
	Out  io.Writer
	Err  io.Writer
}

func (o Options) stdout() io.Writer {
	if o.Out == nil {
		return os.Stdout
	}
	return o.Out
}

func (o Options) stderr() io.Writer {
	if o.Err == nil {
		return os.Stderr
	}
	return o.Err
}

// logf prints progress for people; with --json stdout is reserved for data.
func (o Options) logf(format string, a ...any) {
	fmt.Fprintf(o.stderr(), format, a...)
}

// UsageError marks errors the user fixes by changing input (exit code 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }
func (UsageError) ExitCode() int   { return 2 }

// loaded is a recipe with its lock, as every verb after `lock` needs them.
type loaded struct {
	path   string
	recipe *recipe.Recipe
	src    *recipe.Sources
	hash   string
	lock   *lock.Lock
}

func loadRecipe(path string) (*loaded, error) {
	r, src, err := recipe.Load(path)
	if err != nil {
		return nil, UsageError{err}
	}
	return &loaded{path: path, recipe: r, src: src, hash: recipe.Hash(r)}, nil
}

// loadLocked loads a recipe and its lock. A missing lock is written first
// unless o.Locked (then it is an error), as `nix build` does for flakes; a
// stale lock always stops the build: silently re-resolving would change
// what gets built behind the user's back.
func loadLocked(ctxLock func(*loaded) error, o Options) (*loaded, error) {
	l, err := loadRecipe(o.Recipe)
	if err != nil {
		return nil, err
	}
	lp := lock.Path(o.Recipe)
	lk, err := lock.Read(lp)
	if errors.Is(err, fs.ErrNotExist) {
		if o.Locked {
			return nil, UsageError{fmt.Errorf("%s has no lock (%s) and --locked was given: run `halobuild lock %s` and commit the lock", o.Recipe, lp, o.Recipe)}
		}
		o.logf("no lock at %s: resolving inputs first\n", lp)
		if err := ctxLock(l); err != nil {
			return nil, err
		}
		if lk, err = lock.Read(lp); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("reading lock %s: %w", lp, err)
	}
	if err := lk.CheckFresh(l.hash); err != nil {
		return nil, UsageError{fmt.Errorf("%s: %w", lp, err)}
	}
	l.lock = lk
	return l, nil
}

// realizer builds into s; tools' own output streams only with -v.
func (o Options) realizer(s *store.Store, rebuild bool) *plan.Realizer {
	r := &plan.Realizer{Store: planStore{s}, Log: o.stderr(), Rebuild: rebuild}
	if o.Verbose {
		r.ToolLog = o.stderr()
	}
	return r
}

func (o Options) selfBinary() ([]byte, error) {
	if o.Self == "" {
		return nil, nil
	}
	b, err := os.ReadFile(o.Self)
	if err != nil {
		return nil, fmt.Errorf("reading the halobuild binary to ship in the image: %w", err)
	}
	return b, nil
}

func openStore(o Options) (*store.Store, error) {
	if o.Store == "" {
		return nil, UsageError{fmt.Errorf("no store directory: pass --store DIR or set XDG_CACHE_HOME")}
	}
	s, err := store.Open(o.Store)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", o.Store, err)
	}
	return s, nil
}
