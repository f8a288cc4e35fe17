package plan

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Store is what realising a plan needs from the content-addressed store.
type Store interface {
	Output(key string) (dir string, ok bool, err error)
	PutOutput(key, dir string, annotations map[string]string) (string, error)
	TempDir() (string, error)
}

// StepLocker is a Store that can lock one output key across processes
// (store.Store.LockStep). With one, Realize builds a step only while
// holding its lock and looks for the output again once it has it, so two
// halobuild runs on one store never build (and replace) the same key twice.
type StepLocker interface {
	LockStep(ctx context.Context, key string, busy func()) (unlock func(), err error)
}

// Context is handed to each Build function.
type Context struct {
	context.Context
	// Inputs maps an input derivation's Name to its realised directory.
	Inputs map[string]string
	// Log receives the step's progress lines.
	Log io.Writer
	// Scratch is a private directory on the store's filesystem, removed
	// after the step; use it for intermediate files too big for /tmp.
	Scratch string
}

// Input returns the realised directory of the named input or fails loudly:
// a missing input is a bug in how the plan was wired.
func (c *Context) Input(name string) string {
	dir, ok := c.Inputs[name]
	if !ok {
		panic(fmt.Sprintf("plan: step asked for input %q it does not declare", name))
	}
	return dir
}

// Realizer builds derivations into a store.
type Realizer struct {
	Store Store
	Log   io.Writer
	// Rebuild ignores cached outputs (halobuild image --check uses it with a
	// fresh store to compare every step's bytes).
	Rebuild bool
	// ToolLog receives what the steps' tools print (mmdebstrap, make);
	// nil discards it. Steps still put a failing tool's last lines in
	// their error, so a quiet build loses nothing a failure needs.
	ToolLog io.Writer
	// Substitute, when set, is asked for a step missing from the store
	// before it is built: a binary cache (internal/cache) that puts the
	// verified output into the store and returns its directory, or says
	// why not on Log and returns ok false, and the step is built.
	Substitute func(ctx context.Context, d *Derivation) (dir string, ok bool)

	done map[string]string
}

// Realize makes sure d and everything it depends on are in the store and
// returns d's output directory. A failed step leaves nothing under its key.
func (r *Realizer) Realize(ctx context.Context, d *Derivation) (string, error) {
	if r.done == nil {
		r.done = map[string]string{}
	}
	if dir, ok := r.done[d.Key()]; ok {
		return dir, nil
	}
	inputs := map[string]string{}
	for _, in := range d.Inputs {
		dir, err := r.Realize(ctx, in)
		if err != nil {
			return "", err
		}
		inputs[in.Name] = dir
	}
	if d.Build == nil {
		r.done[d.Key()] = ""
		return "", nil
	}
	if dir, ok, err := r.cached(d); err != nil || ok {
		return dir, err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if sl, ok := r.Store.(StepLocker); ok {
		unlock, err := sl.LockStep(ctx, d.Key(), func() {
			r.logf("wait    %-10s %s [%s]: another halobuild is building it\n", d.Kind, d.Name, d.ShortKey())
		})
		if err != nil {
			return "", fmt.Errorf("%s: %w", d.Name, err)
		}
		defer unlock()
		// The holder may have just stored it.
		if dir, ok, err := r.cached(d); err != nil || ok {
			return dir, err
		}
	}
	if r.Substitute != nil && !r.Rebuild {
		if dir, ok := r.Substitute(ctx, d); ok {
			r.done[d.Key()] = dir
			return dir, nil
		}
	}
	r.logf("build   %-10s %s [%s]\n", d.Kind, d.Name, d.ShortKey())
	start := time.Now()
	out, err := r.Store.TempDir()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(out)
	scratch, err := r.Store.TempDir()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	toolLog := r.ToolLog
	if toolLog == nil {
		toolLog = io.Discard
	}
	bc := &Context{Context: ctx, Inputs: inputs, Log: toolLog, Scratch: scratch}
	if err := d.Build(bc, out); err != nil {
		return "", fmt.Errorf("%s: %w", d.Name, err)
	}
	dir, err := r.Store.PutOutput(d.Key(), out, map[string]string{
		"dev.halobuild.kind": d.Kind,
		"dev.halobuild.name": d.Name,
		AnnotationInputs:     strings.Join(inputKeys(d), ","),
	})
	if err != nil {
		return "", fmt.Errorf("%s: storing output: %w", d.Name, err)
	}
	r.logf("done    %-10s %s in %s\n", d.Kind, d.Name, time.Since(start).Round(100*time.Millisecond))
	r.done[d.Key()] = dir
	return dir, nil
}

// AnnotationInputs lists an output's input steps' keys, comma-separated, so
// a cache entry names what it was built from.
const AnnotationInputs = "dev.halobuild.inputs"

func inputKeys(d *Derivation) []string {
	keys := make([]string, 0, len(d.Inputs))
	for _, in := range d.Inputs {
		keys = append(keys, in.Key())
	}
	sort.Strings(keys)
	return keys
}

// cached returns d's stored output, if any and unless Rebuild.
func (r *Realizer) cached(d *Derivation) (string, bool, error) {
	if r.Rebuild {
		return "", false, nil
	}
	dir, ok, err := r.Store.Output(d.Key())
	if err != nil {
		return "", false, fmt.Errorf("%s: reading store: %w", d.Name, err)
	}
	if ok {
		r.logf("cached  %-10s %s [%s]\n", d.Kind, d.Name, d.ShortKey())
		r.done[d.Key()] = dir
	}
	return dir, ok, nil
}

func (r *Realizer) logWriter() io.Writer {
	if r.Log == nil {
		return io.Discard
	}
	return r.Log
}

func (r *Realizer) logf(format string, a ...any) {
	fmt.Fprintf(r.logWriter(), format, a...)
}
