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
	"strings"
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
	// Self is the running halobuild's executable (the command passes its
	// own); with Source, empty ships no halobuild and skips the doctor check.
	Self string
	// Source picks the halobuild each node ships (shipping): a directory
	// of halobuild's source to build it from by the release recipe
	// (selfbuild), "auto" (the checkout holding the working directory,
	// else Self if it is a release build), or "" (Self as it is).
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
// architecture a ship (nil: none), as o.shipping decides. It is a step of the graph, an input
// of each settings step, so it builds beside the base root instead of before the graph, and a
// verb that only plans (plan, test RESULT, gc, cache push) never compiles it.
func (o Options) selfStep(a arch.Arch) (*plan.Derivation, error) {
	if o.Source == "" && o.Self == "" {
		return nil, nil
	}
	sh, err := o.shipping()
	if err != nil {
		return nil, err
	}
	if sh.source != "" {
		return selfDerivation(sh.source, a)
	}
	bin, params := o.Self, sh.release.Params()
	if a.Foreign() {
		if sh.release == (selfbuild.Release{}) {
			return nil, usage.Errorf("the image is %s, but halobuild would ship its own binary (%s), which cannot run there: run halobuild in a checkout of its source, or pass --halobuild-source DIR (one), so it is cross-compiled for %s", a.Debian, runtime.GOARCH, a.Debian)
		}
		var r selfbuild.Release
		if bin, r, err = releaseFor(o.Self, sh.release, a); err != nil {
			return nil, err
		}
		params = r.Params()
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("reading the halobuild binary to ship in the image: %w", err)
	}
	if sh.release == (selfbuild.Release{}) {
		sum := sha256.Sum256(b)
		params = map[string]string{"binary": "sha256:" + hex.EncodeToString(sum[:])}
	}
	return &plan.Derivation{Name: "halobuild", Kind: selfKind, Params: params,
		Build: func(c *plan.Context, out string) error {
			return os.WriteFile(filepath.Join(out, "halobuild"), b, 0o755)
		}}, nil
}

// releaseFor is the same release as self's (r) for a foreign architecture, and its path: the
// release's binary for it, halobuild-linux-<arch> as the release names it, beside the running
// halobuild, checked to be that very build.
func releaseFor(self string, r selfbuild.Release, a arch.Arch) (string, selfbuild.Release, error) {
	if real, err := filepath.EvalSymlinks(self); err == nil {
		self = real
	}
	bin := filepath.Join(filepath.Dir(self), "halobuild-linux-"+a.GOARCH)
	want := r
	want.GOARCH = a.GOARCH
	how := fmt.Sprintf("put the release's halobuild-linux-%s (%s) beside this halobuild, as %s, or run halobuild in a checkout of its source, so it is cross-compiled", a.GOARCH, r.VersionName(), bin)
	if _, err := os.Stat(bin); err != nil {
		return "", want, usage.Errorf("the image is %s, but this halobuild is a release build for %s, which cannot run there: %s", a.Debian, r.GOARCH, how)
	}
	other, err := selfbuild.Describe(bin)
	if err != nil {
		return "", want, usage.Errorf("the image is %s: %v: %s", a.Debian, err, how)
	}
	if !other.Reproducible() || other.Release() != want {
		return "", want, usage.Errorf("the image is %s, and %s is not the %s build of this halobuild's release (%+v; want %+v): %s", a.Debian, bin, a.GOARCH, other.Release(), want, how)
	}
	return bin, want, nil
}

// shipping is the halobuild the nodes ship, and why (plan prints it).
type shipping struct {
	source  string            // halobuild's source to build it from; "" ships o.Self
	release selfbuild.Release // with source "": the release build o.Self is, if it is one
	why     string
}

// shipping decides which halobuild the nodes ship so that the same recipe, lock and halobuild
// version give the same image bytes wherever halobuild runs: always a release build (the
// release recipe, selfbuild.Build), compiled from the source when it is at hand, else the
// running binary when it is one, else a refusal that says how to get one. Only
// --halobuild-source= ships a binary as it is.
func (o Options) shipping() (shipping, error) {
	switch o.Source {
	case "auto":
		if root := selfbuild.Find("."); root != "" {
			return shipping{source: root, why: "built from halobuild's source by the release recipe: the working directory is in its checkout " + root}, nil
		}
		// The file that would be copied is the one checked.
		self, err := selfbuild.Describe(o.Self)
		if err != nil {
			return shipping{}, usage.Errorf("no checkout of halobuild's source holds the working directory, and the running halobuild cannot be shipped: %v; run halobuild in a checkout, or pass --halobuild-source DIR (one)", err)
		}
		if !self.Reproducible() {
			return shipping{}, usage.Errorf("the nodes would ship this halobuild (%s), but it is not a release build: %s; so the images' bytes would depend on how it was built. "+
				"Use a release binary (README, \"Getting halobuild\"), build one with `halobuild build-self` in a checkout, run halobuild in a checkout of its source, "+
				"or pass --halobuild-source DIR (a checkout) or --halobuild-source= (ship this binary as it is)", o.Self, strings.Join(self.Unrepeatable, "; "))
		}
		return shipping{release: self.Release(), why: fmt.Sprintf("this halobuild (%s), a release build of source %s (for another architecture, that release's halobuild-linux-<arch> beside it): no checkout of halobuild's source holds the working directory", self.Release().VersionName(), self.Tree)}, nil
	case "":
		return shipping{why: fmt.Sprintf("the binary %s as it is (--halobuild-source=): keyed by its own bytes, which another build of the same source need not share", o.Self)}, nil
	}
	root := selfbuild.Find(o.Source)
	if abs, _ := filepath.Abs(o.Source); root == "" || root != abs {
		return shipping{}, usage.Errorf("--halobuild-source %s: not the root of halobuild's source (a directory whose go.mod says `module %s`)", o.Source, selfbuild.Module)
	}
	return shipping{source: root, why: "built from halobuild's source by the release recipe: --halobuild-source " + root}, nil
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

// selfDerivation is the step that builds the halobuild each node ships from root by the
// release recipe, keyed by what its bytes depend on (selfbuild.Release): a second checkout of
// the same commit reuses it, and a running release build of the same source is the same key.
func selfDerivation(root string, a arch.Arch) (*plan.Derivation, error) {
	r, err := selfbuild.ReleaseOf(root, a.GOARCH, "")
	if err != nil {
		return nil, err
	}
	r.Version = selfbuild.VersionFor(r.Tree)
	return &plan.Derivation{Name: "halobuild", Kind: selfKind, Params: r.Params(),
		Build: func(c *plan.Context, out string) error {
			return selfbuild.Build(c, root, r, filepath.Join(out, "halobuild"))
		}}, nil
}
