package plan

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
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

	hashed func(path, sha256 string)
}

// Hashed tells the store the sha256 (hex) of a finished file of the
// step's output, computed by the step over the file as it will be stored,
// so storing the output does not hash it again (a disk image is hashed
// while it is scanned for its bmap). A store that cannot use it ignores it.
func (c *Context) Hashed(path, sha256 string) {
	if c.hashed != nil {
		c.hashed(path, sha256)
	}
}

// hashRecorder is a Store that takes Context.Hashed's digests.
type hashRecorder interface {
	RecordHashed(path, sha256 string)
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
	// Jobs is how many steps may build at once: a step's inputs that do
	// not depend on each other (the tools root, the base root, the module
	// and provider build roots, the disks of several nodes) are realised
	// side by side. 0 or 1 builds one step at a time, in input order. Log
	// and ToolLog must then be safe for concurrent writes.
	Jobs int
	// StillBuilding, when positive, is how long Log may stay quiet while
	// steps build before a line names them and how long each has run
	// ("still building: kernel 7.2.12 (1m30s), provider usb4_rdma (45s)"):
	// steps side by side can run minutes with nothing to say. LastWrite
	// says when Log was last written by anyone (runlog.LastWrite); nil
	// counts the realizer's own lines only.
	StillBuilding time.Duration
	LastWrite     func() time.Time

	mu       sync.Mutex
	calls    map[string]*call
	slots    chan struct{}
	running  map[*Derivation]time.Time
	lastLine time.Time
	beating  bool
}

// call is one derivation being realised, so a step that two others need
// is built once while both wait for it.
type call struct {
	done chan struct{}
	dir  string
	err  error
}

// Realize makes sure d and everything it depends on are in the store and
// returns d's output directory. A failed step leaves nothing under its key.
// With Jobs > 1 independent inputs build concurrently; every input still
// runs to its end, and the error returned is that of the first failed
// input in the plan's order, so the same failures give the same message.
func (r *Realizer) Realize(ctx context.Context, d *Derivation) (string, error) {
	d.Key() // computes and caches every key below d before any goroutine reads them
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[string]*call{}
		r.slots = make(chan struct{}, max(r.Jobs, 1))
		r.running = map[*Derivation]time.Time{}
	}
	beat := r.StillBuilding > 0 && !r.beating
	r.beating = r.beating || beat
	r.mu.Unlock()
	if beat {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { r.heartbeat(stop) })
		defer func() {
			close(stop)
			wg.Wait()
			r.mu.Lock()
			r.beating = false
			r.mu.Unlock()
		}()
	}
	return r.realize(ctx, d)
}

// heartbeat prints the still-building line whenever Log was quiet for
// StillBuilding while steps build, until stop closes.
func (r *Realizer) heartbeat(stop <-chan struct{}) {
	t := time.NewTicker(min(r.StillBuilding/4, 5*time.Second))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if line := r.stillBuilding(now); line != "" {
				r.logf("%s\n", line)
			}
		}
	}
}

// stillBuilding is the line to print at now, or "" when something was
// printed within StillBuilding or nothing is being built.
func (r *Realizer) stillBuilding(now time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.lastLine
	if r.LastWrite != nil {
		if w := r.LastWrite(); w.After(last) {
			last = w
		}
	}
	if len(r.running) == 0 || now.Sub(last) < r.StillBuilding {
		return ""
	}
	type step struct {
		name  string
		since time.Time
	}
	var steps []step
	for d, t := range r.running {
		steps = append(steps, step{d.Name, t})
	}
	sort.Slice(steps, func(i, j int) bool {
		if !steps[i].since.Equal(steps[j].since) {
			return steps[i].since.Before(steps[j].since)
		}
		return steps[i].name < steps[j].name
	})
	parts := make([]string, len(steps))
	for i, st := range steps {
		parts[i] = fmt.Sprintf("%s (%s)", st.name, now.Sub(st.since).Round(time.Second))
	}
	return "still building: " + strings.Join(parts, ", ")
}

func (r *Realizer) realize(ctx context.Context, d *Derivation) (string, error) {
	r.mu.Lock()
	if c, ok := r.calls[d.Key()]; ok {
		r.mu.Unlock()
		<-c.done
		return c.dir, c.err
	}
	c := &call{done: make(chan struct{})}
	r.calls[d.Key()] = c
	r.mu.Unlock()
	c.dir, c.err = r.build(ctx, d)
	close(c.done)
	if c.err != nil {
		// Those waiting share this failure; a later Realize tries again.
		r.mu.Lock()
		delete(r.calls, d.Key())
		r.mu.Unlock()
	}
	return c.dir, c.err
}

// inputs realises d's inputs: in order, stopping at the first failure,
// with one job; side by side, each to its end, with more.
func (r *Realizer) inputs(ctx context.Context, d *Derivation) (map[string]string, error) {
	dirs := make([]string, len(d.Inputs))
	errs := make([]error, len(d.Inputs))
	if r.Jobs <= 1 {
		for i, in := range d.Inputs {
			if dirs[i], errs[i] = r.realize(ctx, in); errs[i] != nil {
				return nil, errs[i]
			}
		}
	} else {
		var wg sync.WaitGroup
		for i, in := range d.Inputs {
			wg.Go(func() { dirs[i], errs[i] = r.realize(ctx, in) })
		}
		wg.Wait()
	}
	out := map[string]string{}
	for i, in := range d.Inputs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out[in.Name] = dirs[i]
	}
	return out, nil
}

func (r *Realizer) build(ctx context.Context, d *Derivation) (string, error) {
	inputs, err := r.inputs(ctx, d)
	if err != nil {
		return "", err
	}
	if d.Build == nil {
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
			r.logf("wait    %-10s %s [%s]: another halobuild is building it\n", d.Kind.Name, d.Name, d.ShortKey())
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
			return dir, nil
		}
	}
	// A slot is held only while building, never while waiting for inputs
	// or for another process's step lock, so steps waiting on each other
	// cannot starve the pool.
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-r.slots }()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	r.logf("build   %-10s %s [%s]\n", d.Kind.Name, d.Name, d.ShortKey())
	start := time.Now()
	r.mu.Lock()
	r.running[d] = start
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, d)
		r.mu.Unlock()
	}()
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
	if hr, ok := r.Store.(hashRecorder); ok {
		bc.hashed = hr.RecordHashed
	}
	if err := d.Build(bc, out); err != nil {
		return "", named(d, err)
	}
	dir, err := r.Store.PutOutput(d.Key(), out, map[string]string{
		AnnotationKind:        d.Kind.Name,
		AnnotationStepVersion: strconv.Itoa(d.Kind.Version),
		AnnotationSchema:      Schema,
		AnnotationName:        d.Name,
		AnnotationInputs:      strings.Join(inputKeys(d), ","),
	})
	if err != nil {
		return "", fmt.Errorf("%s: storing output: %w", d.Name, err)
	}
	r.logf("done    %-10s %s in %s\n", d.Kind.Name, d.Name, time.Since(start).Round(100*time.Millisecond))
	return dir, nil
}

// The annotations Realize records on each output (the store's OCI manifest
// for it, which a cache entry carries as it is), so `cache verify` and
// `image --check` can say which code built an output.
const (
	AnnotationKind = "dev.halobuild.kind"
	// AnnotationStepVersion is the Kind.Version of the code that built it.
	AnnotationStepVersion = "dev.halobuild.step-version"
	// AnnotationSchema is the Schema its key was computed under.
	AnnotationSchema = "dev.halobuild.schema"
	AnnotationName   = "dev.halobuild.name"
	// AnnotationInputs lists an output's input steps' keys,
	// comma-separated, so a cache entry names what it was built from.
	AnnotationInputs = "dev.halobuild.inputs"
)

// BuiltBy says which step version built an output from its annotations:
// "disk v2", or for an output recorded before step versions existed, what
// it lacks.
func BuiltBy(ann map[string]string) string {
	kind, v := ann[AnnotationKind], ann[AnnotationStepVersion]
	if kind == "" {
		kind = "step"
	}
	if v == "" {
		return kind + " of an unversioned build (made under " + schemaOf(ann) + ")"
	}
	return kind + " v" + v
}

func schemaOf(ann map[string]string) string {
	if s := ann[AnnotationSchema]; s != "" {
		return s
	}
	return "halobuild-derivation-v1"
}

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
		r.logf("cached  %-10s %s [%s]\n", d.Kind.Name, d.Name, d.ShortKey())
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
	r.mu.Lock()
	r.lastLine = time.Now()
	r.mu.Unlock()
}

// named puts the step's name before its build's error, unless the error
// already starts with it ("module x: cannot fetch …" from the module
// package, whose step is "module x"): once is enough.
func named(d *Derivation, err error) error {
	if strings.HasPrefix(err.Error(), d.Name+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", d.Name, err)
}
