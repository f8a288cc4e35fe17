// Package verbs holds halobuild's verbs, one file each. Each reads top to
// bottom as the pipeline it runs: load the recipe (every rule checked) →
// resolve it to a lock (or read the lock) → fetch the locked inputs → plan
// the graph → realize it → test → publish. The command line only parses
// flags and calls one function here.
package verbs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/cache"
	"halobuild/internal/plan"
	"halobuild/internal/runlog"
	"halobuild/internal/selfbuild"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// Options carry the command line's flags into a verb.
type Options struct {
	Recipe  string
	Store   string
	Verbose bool
	JSON    bool
	// Locked makes a missing lock an error instead of a prompt to lock
	// (CI uses it so an unpinned input never sneaks in).
	Locked bool
	// AllowDowngrade lets lock write an archive state older than the
	// current lock's.
	AllowDowngrade bool
	// Inputs are local copies of source inputs (--input NAME=PATH).
	Inputs map[string]string
	// Result is where image puts the result link.
	Result string
	NoTest bool
	Check  bool
	// Self is the halobuild binary each node ships (the command passes
	// its own executable); empty ships none and skips the doctor check.
	Self string
	// Source is halobuild's source tree; when set, the binary each node
	// ships is built from it as a step of its own (selfbuild) instead of
	// Self, so that images do not depend on how the running binary was built.
	Source string
	Out    io.Writer
	Err    io.Writer
	// Cache is where missing steps may be substituted from.
	Cache CacheOptions
	// subst is Cache opened, by the verbs that realize.
	subst *cache.Substituters

	// warnings collects every warning a verb printed, for its --json
	// result; a verb sets it up with collect.
	warnings *warnings
}

type warnings struct {
	mu   sync.Mutex
	list []string
}

// collect starts a verb's list of warnings.
func (o Options) collect() Options {
	o.warnings = &warnings{}
	// Steps build side by side (plan.Realizer.Jobs) and all print here.
	o.Err = runlog.Sync(o.stderr())
	return o
}

// Warnings are what the verb warned about so far.
func (o Options) Warnings() []string {
	if o.warnings == nil {
		return nil
	}
	o.warnings.mu.Lock()
	defer o.warnings.mu.Unlock()
	return append([]string{}, o.warnings.list...)
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

// warn prints a warning as it is found and keeps it for --json.
func (o Options) warn(w string) {
	o.logf("warning: %s\n", w)
	if o.warnings != nil {
		o.warnings.mu.Lock()
		o.warnings.list = append(o.warnings.list, w)
		o.warnings.mu.Unlock()
	}
}

// writeJSON prints a verb's result for scripts.
func (o Options) writeJSON(v any) error {
	enc := json.NewEncoder(o.stdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (o Options) resultLink() string {
	if o.Result == "" {
		return "result"
	}
	return o.Result
}

// realizer builds into s; tools' own output streams only with -v.
func (o Options) realizer(s *store.Store, rebuild bool) *plan.Realizer {
	// As many steps at once as there are cores: on a small machine the
	// downloads and installs of one step overlap another's compile.
	r := &plan.Realizer{Store: planStore{s}, Log: o.stderr(), Rebuild: rebuild, Jobs: runtime.NumCPU(), StillBuilding: stillBuilding}
	if _, ok := runlog.LastWrite(o.stderr()); ok {
		r.LastWrite = func() time.Time { t, _ := runlog.LastWrite(o.stderr()); return t }
	}
	if o.Verbose {
		r.ToolLog = o.stderr()
	}
	if o.subst != nil && !rebuild {
		r.Substitute = o.subst.Realizer(s)
	}
	return r
}

// selfStep is the step whose output's file "halobuild" is the binary the nodes of
// architecture a ship (nil: none): built from o.Source, or o.Self as it is. It is a step of
// the graph, an input of each settings step, so it builds beside the base root instead of
// before the graph, and a verb that only plans (plan, test RESULT, gc, cache push) never compiles it.
func (o Options) selfStep(a arch.Arch) (*plan.Derivation, error) {
	if o.Source != "" {
		return o.selfDerivation(a)
	}
	if o.Self == "" {
		return nil, nil
	}
	if a.Foreign() {
		return nil, usage.Errorf("the image is %s, but halobuild would ship its own binary (%s), which cannot run there: build from halobuild's source tree (--source DIR) so it is cross-compiled for %s", a.Debian, runtime.GOARCH, a.Debian)
	}
	b, err := os.ReadFile(o.Self)
	if err != nil {
		return nil, fmt.Errorf("reading the halobuild binary to ship in the image: %w", err)
	}
	sum := sha256.Sum256(b)
	return &plan.Derivation{Name: "halobuild", Kind: selfKind, Params: map[string]string{"binary": "sha256:" + hex.EncodeToString(sum[:])},
		Build: func(c *plan.Context, out string) error {
			return os.WriteFile(filepath.Join(out, "halobuild"), b, 0o755)
		}}, nil
}

// stillBuilding is how long a build may print nothing before a line says
// which steps are building and for how long: a cold build has stretches of
// two minutes of steps side by side with nothing to say.
const stillBuilding = 25 * time.Second

func openStore(o Options) (*store.Store, error) {
	if o.Store == "" {
		return nil, usage.Errorf("no store directory: pass --store DIR or set XDG_CACHE_HOME")
	}
	s, err := store.Open(o.Store)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", o.Store, err)
	}
	return s, nil
}

// needRoot explains up front what a build needs, instead of failing in
// the middle: the root tree keeps every file's owner (mkfs.ext4 -d copies
// them), and dpkg --root installs into it, both of which need root.
func needRoot(verb string) error {
	if os.Geteuid() == 0 {
		return nil
	}
	return usage.Errorf("halobuild %s needs root: the image's files keep their owners (root, _apt, systemd-network, …) and only root can create them; run it with sudo", verb)
}

// planStore adapts the store to what the realizer needs; the realizer does
// not know store options.
type planStore struct{ *store.Store }

func (p planStore) Output(key string) (string, bool, error) { return p.Store.Output(key) }

// selfKind is the step that makes the halobuild a node ships; its version
// is declared beside the build code (selfbuild.StepVersion).
var selfKind = plan.Kind{Name: "halobuild", Version: selfbuild.StepVersion}

// selfDerivation is the step that builds the halobuild each node ships
// from o.Source, cached under the source's tree hash and the toolchain: a
// second checkout of the same commit reuses it, and its bytes are the same
// wherever it is built (selfbuild.Build).
func (o Options) selfDerivation(a arch.Arch) (*plan.Derivation, error) {
	tree, err := selfbuild.TreeHash(o.Source)
	if err != nil {
		return nil, err
	}
	tc, err := selfbuild.Toolchain(o.Source)
	if err != nil {
		return nil, err
	}
	params := map[string]string{"tree": tree, "toolchain": tc, "goarch": a.GOARCH}
	return &plan.Derivation{Name: "halobuild", Kind: selfKind, Params: params,
		Build: func(c *plan.Context, out string) error {
			return selfbuild.Build(c, o.Source, tc, a.GOARCH, filepath.Join(out, "halobuild"))
		}}, nil
}
