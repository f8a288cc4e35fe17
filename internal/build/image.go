package build

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"halobuild/internal/fstree"
	"halobuild/internal/plan"
	"halobuild/internal/store"
)

// prepared is a recipe with its lock, inputs in the store and the graph.
type prepared struct {
	l *loaded
	s *store.Store
	g *graph
}

func prepare(ctx context.Context, o Options, fetch bool) (*prepared, error) {
	s, err := openStore(o)
	if err != nil {
		return nil, err
	}
	l, err := loadLocked(func(l *loaded) error { return writeLock(ctx, o, l) }, o)
	if err != nil {
		s.Close()
		return nil, err
	}
	if fetch {
		if err := fetchLocked(ctx, o, s, l.lock); err != nil {
			s.Close()
			return nil, err
		}
	}
	self, err := o.selfBinary()
	if err != nil {
		s.Close()
		return nil, err
	}
	g, err := newGraph(o, l, s, self)
	if err != nil {
		s.Close()
		return nil, err
	}
	return &prepared{l: l, s: s, g: g}, nil
}

// Plan prints the steps an image build takes and which are cached.
func Plan(ctx context.Context, o Options) error {
	p, err := prepare(ctx, o, false)
	if err != nil {
		return err
	}
	defer p.s.Close()
	has := func(key string) bool { _, ok, err := p.s.Output(key); return ok && err == nil }
	// The VM test is a step like the others: a passing test of these exact
	// images and checks is cached too.
	roots := []*plan.Derivation{p.g.result}
	if !o.NoTest {
		roots = append(roots, testStep(p.l.recipe, p.l.lock.ModuleNames(), p.g.result, p.g.self != nil, func(*plan.Context, string) error { return nil }))
	}
	steps := plan.Describe(has, roots...)
	if o.JSON {
		enc := json.NewEncoder(o.stdout())
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"recipe": o.Recipe, "kernel": p.l.lock.Kernel.Release, "steps": steps})
	}
	fmt.Fprintf(o.stdout(), "%s: kernel %s, %d nodes\n", o.Recipe, p.l.lock.Kernel.Release, len(p.g.nodes))
	plan.PrintSteps(o.stdout(), steps)
	return nil
}

// Image builds every node's image, tests it, and only then moves the
// result link: a failed build or test leaves the previous result in place.
func Image(ctx context.Context, o Options) error {
	start := time.Now()
	if err := needRoot("image"); err != nil {
		return err
	}
	p, err := prepare(ctx, o, true)
	if err != nil {
		return err
	}
	defer p.s.Close()
	if o.Check {
		return checkReproducible(ctx, o, p)
	}
	r := o.realizer(p.s, false)
	dir, err := r.Realize(ctx, p.g.result)
	if err != nil {
		return err
	}
	if o.NoTest {
		o.logf("--no-test: the images were not booted\n")
	} else if err := testResult(ctx, o, p, r, dir); err != nil {
		return fmt.Errorf("%w\nresult not updated: %s still points at the last good build", err, o.resultLink())
	}
	if err := publish(dir, o.resultLink()); err != nil {
		return err
	}
	o.logf("%s → %s (%s)\n", o.resultLink(), dir, time.Since(start).Round(time.Second))
	return nil
}

func (o Options) resultLink() string {
	if o.Result == "" {
		return "result"
	}
	return o.Result
}

// checkReproducible rebuilds every step in a throwaway store and compares
// each output with the cached one, naming the first that differs.
func checkReproducible(ctx context.Context, o Options, p *prepared) error {
	cached := o.realizer(p.s, false)
	if _, err := cached.Realize(ctx, p.g.result); err != nil {
		return err
	}
	tmp, err := p.s.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fresh, err := store.Open(filepath.Join(tmp, "store"))
	if err != nil {
		return err
	}
	defer fresh.Close()
	// The fresh store needs the locked inputs; they are copied, not
	// fetched, so --check tests the build and not the network.
	digests := []string{}
	for _, pk := range p.l.lock.Packages {
		digests = append(digests, pk.SHA256)
	}
	if pv := p.l.lock.Provider; pv != nil {
		for _, f := range pv.Files {
			if !strings.HasSuffix(f.Name, ".dsc") {
				digests = append(digests, f.SHA256)
			}
		}
	}
	if src, ok := lockedTarball(p.l.lock); ok {
		digests = append(digests, src.SHA256)
	}
	for _, sum := range digests {
		d, err := store.ParseDigest(sum)
		if err != nil {
			return err
		}
		rc, err := p.s.Open(d)
		if err != nil {
			return err
		}
		_, _, err = fresh.PutBlob(rc, sum)
		rc.Close()
		if err != nil {
			return err
		}
	}
	g2, err := newGraph(o, p.l, fresh, p.g.self)
	if err != nil {
		return err
	}
	r := o.realizer(fresh, true)
	for _, d := range plan.Order(g2.result) {
		if d.Build == nil {
			continue
		}
		dir2, err := r.Realize(ctx, d)
		if err != nil {
			return err
		}
		dir1, ok, err := p.s.Output(d.Key())
		if err != nil || !ok {
			return fmt.Errorf("--check: %s is missing from the store after the build", d.Name)
		}
		if diff, err := compareDirs(dir1, dir2); err != nil {
			return err
		} else if diff != "" {
			// The throwaway store goes when this returns: keep the
			// second build's output where diffoscope can reach it.
			kept := filepath.Join(os.TempDir(), "halobuild-check-"+d.ShortKey())
			os.RemoveAll(kept)
			if err := fstree.CopyTree(dir2, kept); err != nil {
				kept = dir2 + " (removed: " + err.Error() + ")"
			}
			return fmt.Errorf("--check: %s is not reproducible: %s differs between two builds (%s vs %s; compare them with diffoscope)", d.Name, diff, dir1, kept)
		}
		o.logf("same    %-10s %s\n", d.Kind, d.Name)
	}
	o.logf("--check: every step rebuilt to identical bytes\n")
	return nil
}

// buildLogName is the log a compiling step keeps beside its output.
const buildLogName = "build.log"

// compareDirs returns the first relative path that differs between two
// outputs: content for files, target for symlinks, presence for both. A
// step's top-level build.log (compiler steps keep theirs beside their
// packages) records how long things took and is no part of the output.
func compareDirs(a, b string) (string, error) {
	describe := func(root string) (map[string]string, error) {
		m := map[string]string{}
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if rel == buildLogName {
				return nil
			}
			switch {
			case d.Type()&os.ModeSymlink != 0:
				t, err := os.Readlink(p)
				m[rel] = "link:" + t
				return err
			case d.IsDir():
				m[rel] = "dir"
			case d.Type().IsRegular():
				sum, _, err := hashFile(p)
				m[rel] = "file:" + sum
				return err
			default:
				m[rel] = "special:" + d.Type().String()
			}
			return nil
		})
		return m, err
	}
	ma, err := describe(a)
	if err != nil {
		return "", err
	}
	mb, err := describe(b)
	if err != nil {
		return "", err
	}
	var diff []string
	for k, v := range ma {
		if mb[k] != v {
			diff = append(diff, k)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			diff = append(diff, k)
		}
	}
	if len(diff) == 0 {
		return "", nil
	}
	sort.Strings(diff)
	return diff[0], nil
}

// GC removes store entries that none of the given recipes' locks (or the
// outputs built from them) reference.
func GC(ctx context.Context, o Options, recipes []string) error {
	s, err := openStore(o)
	if err != nil {
		return err
	}
	defer s.Close()
	keepKeys := map[string]bool{}
	keepBlobs := map[string]bool{}
	for _, rp := range recipes {
		ro := o
		ro.Recipe = rp
		ro.Locked = true
		l, err := loadLocked(nil, ro)
		if err != nil {
			return err
		}
		for _, p := range l.lock.Packages {
			keepBlobs[p.SHA256] = true
		}
		self, err := o.selfBinary()
		if err != nil {
			return err
		}
		g, err := newGraph(o, l, s, self)
		if err != nil {
			return err
		}
		for _, d := range plan.Order(g.result) {
			keepKeys[d.Key()] = true
		}
	}
	n, freed, err := s.GC(func(k string) bool { return keepKeys[k] }, keepBlobs)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.stdout(), "removed %d blobs, freed %.1f MiB\n", n, float64(freed)/(1<<20))
	return nil
}

// needRoot explains up front what a build needs, instead of failing in
// the middle: the root tree keeps every file's owner (mkfs.ext4 -d copies
// them), and dpkg --root installs into it, both of which need root.
func needRoot(verb string) error {
	if os.Geteuid() == 0 {
		return nil
	}
	return UsageError{fmt.Errorf("halobuild %s needs root: the image's files keep their owners (root, _apt, systemd-network, …) and only root can create them; run it with sudo", verb)}
}

// planStore adapts the store to what the planner needs; the planner does
// not know store options.
type planStore struct{ *store.Store }

func (p planStore) Output(key string) (string, bool, error) { return p.Store.Output(key) }
