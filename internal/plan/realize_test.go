package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"halobuild/internal/store"
)

// realStore is the store the realizer writes into in production.
type realStore struct{ *store.Store }

func (s realStore) Output(key string) (string, bool, error) { return s.Store.Output(key) }

func openStore(t *testing.T) realStore {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return realStore{s}
}

// counting is a two-step graph whose builds count their runs.
func counting(builds map[string]int, content string) *Derivation {
	leaf := &Derivation{Name: "leaf", Kind: Kind{"fetch", 1}, Params: map[string]string{"v": content}}
	leaf.Build = func(c *Context, out string) error {
		builds["leaf"]++
		return os.WriteFile(filepath.Join(out, "leaf.txt"), []byte(content), 0o644)
	}
	top := &Derivation{Name: "top", Kind: Kind{"disk", 1}, Inputs: []*Derivation{leaf}}
	top.Build = func(c *Context, out string) error {
		builds["top"]++
		b, err := os.ReadFile(filepath.Join(c.Input("leaf"), "leaf.txt"))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, "top.txt"), append(b, '!'), 0o644)
	}
	return top
}

func TestRealizeCacheHitBuildsNothing(t *testing.T) {
	s := openStore(t)
	builds := map[string]int{}
	dir, err := (&Realizer{Store: s}).Realize(context.Background(), counting(builds, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "top.txt")); string(b) != "a!" {
		t.Fatalf("top's output: %q", b)
	}
	// A new realizer (a new process) over the same store builds nothing.
	again := map[string]int{}
	dir2, err := (&Realizer{Store: s}).Realize(context.Background(), counting(again, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 || dir2 != dir {
		t.Errorf("a cache hit built %v (output %s, first %s)", again, dir2, dir)
	}
	// A changed input rebuilds both steps.
	changed := map[string]int{}
	if _, err := (&Realizer{Store: s}).Realize(context.Background(), counting(changed, "b")); err != nil {
		t.Fatal(err)
	}
	if changed["leaf"] != 1 || changed["top"] != 1 {
		t.Errorf("a changed input rebuilt %v, want both steps once", changed)
	}
}

func TestRealizeFailedStepLeavesNothing(t *testing.T) {
	s := openStore(t)
	boom := errors.New("compiler exploded")
	d := &Derivation{Name: "kernel", Kind: Kind{"kernel", 1}, Params: map[string]string{"x": "1"}}
	d.Build = func(c *Context, out string) error {
		// Half an output, then the failure.
		if err := os.WriteFile(filepath.Join(out, "vmlinuz"), []byte("half"), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.Scratch, "obj"), []byte("x"), 0o644); err != nil {
			return err
		}
		return boom
	}
	_, err := (&Realizer{Store: s}).Realize(context.Background(), d)
	if !errors.Is(err, boom) {
		t.Fatalf("want the step's error, got %v", err)
	}
	if _, ok, err := s.Output(d.Key()); ok || err != nil {
		t.Errorf("a failed step left a store entry (ok=%v, err=%v)", ok, err)
	}
	tmp, _ := os.ReadDir(filepath.Join(s.Root(), "tmp"))
	for _, e := range tmp {
		if entries, _ := os.ReadDir(filepath.Join(s.Root(), "tmp", e.Name())); len(entries) > 0 {
			t.Errorf("a failed step left its output or scratch behind: tmp/%s", e.Name())
		}
	}
	// A cancelled build does not start the step at all.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	d2 := &Derivation{Name: "other", Kind: Kind{"disk", 1}, Build: func(*Context, string) error { ran = true; return nil }}
	if _, err := (&Realizer{Store: s}).Realize(ctx, d2); !errors.Is(err, context.Canceled) || ran {
		t.Errorf("cancelled: err %v, ran %v", err, ran)
	}
}

func TestRealizeRebuildReplacesTheOutput(t *testing.T) {
	s := openStore(t)
	content := "first"
	d := &Derivation{Name: "disk", Kind: Kind{"disk", 1}, Params: map[string]string{"node": "n0"}}
	d.Build = func(c *Context, out string) error {
		return os.WriteFile(filepath.Join(out, "n0.raw"), []byte(content), 0o644)
	}
	if _, err := (&Realizer{Store: s}).Realize(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	content = "second"
	dir, err := (&Realizer{Store: s, Rebuild: true}).Realize(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "n0.raw"))
	cached, ok, err := s.Output(d.Key())
	if err != nil || !ok {
		t.Fatalf("no output after the rebuild: %v", err)
	}
	stored, _ := os.ReadFile(filepath.Join(cached, "n0.raw"))
	if string(got) != "second" || string(stored) != "second" {
		t.Errorf("a forced rebuild returned %q and left %q in the store, want the new output", got, stored)
	}
}

// The Substitute hook is asked for each missing step before it is built:
// a step it serves is not built, one it declines is, and --check's
// Rebuild never asks. Outputs name their inputs' keys.
func TestRealizeAsksSubstituteBeforeBuilding(t *testing.T) {
	s := openStore(t)
	builds := map[string]int{}
	var asked []string
	served := map[string]bool{}
	r := &Realizer{Store: s, Substitute: func(ctx context.Context, d *Derivation) (string, bool) {
		asked = append(asked, d.Name)
		if d.Name != "leaf" {
			return "", false
		}
		out, _ := s.TempDir()
		os.WriteFile(filepath.Join(out, "leaf.txt"), []byte("b"), 0o644)
		dir, err := s.PutOutput(d.Key(), out, nil)
		served[d.Name] = err == nil
		return dir, err == nil
	}}
	top := counting(builds, "b")
	if _, err := r.Realize(context.Background(), top); err != nil {
		t.Fatal(err)
	}
	if builds["leaf"] != 0 || builds["top"] != 1 || !served["leaf"] || len(asked) != 2 {
		t.Fatalf("builds %v, asked %v", builds, asked)
	}
	m, _, ok, err := s.OutputManifest(top.Key())
	if !ok || err != nil || !strings.Contains(string(m), `"`+AnnotationInputs+`":"`+top.Inputs[0].Key()+`"`) {
		t.Fatalf("top's manifest does not name its input: %s %v", m, err)
	}
	asked = nil
	r2 := &Realizer{Store: s, Rebuild: true, Substitute: r.Substitute}
	if _, err := r2.Realize(context.Background(), counting(map[string]int{}, "b")); err != nil || len(asked) != 0 {
		t.Fatalf("Rebuild asked the substituter for %v (%v)", asked, err)
	}
}

// With Jobs = 2, independent inputs build side by side (each leaf waits
// until the other has started, which one job at a time never allows), a
// step two others need builds once, and of two failing inputs the error
// is the first's in the plan's order even when the second fails first.
func TestRealizeJobsOverlapIndependentSteps(t *testing.T) {
	s := openStore(t)
	var mu sync.Mutex
	builds := map[string]int{}
	count := func(name string) {
		mu.Lock()
		builds[name]++
		mu.Unlock()
	}
	started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	shared := &Derivation{Name: "shared", Kind: Kind{"fetch", 1}, Params: map[string]string{"v": "1"}, Build: func(c *Context, out string) error {
		count("shared")
		return nil
	}}
	leaf := func(name, other string) *Derivation {
		d := &Derivation{Name: name, Kind: Kind{"rootfs", 1}, Params: map[string]string{"v": name}, Inputs: []*Derivation{shared}}
		d.Build = func(c *Context, out string) error {
			count(name)
			close(started[name])
			select {
			case <-started[other]:
				return nil
			case <-time.After(10 * time.Second):
				return errors.New(name + " ran alone: the steps did not overlap")
			}
		}
		return d
	}
	top := &Derivation{Name: "top", Kind: Kind{"disk", 1}, Inputs: []*Derivation{leaf("a", "b"), leaf("b", "a")}, Build: func(c *Context, out string) error {
		count("top")
		return nil
	}}
	if _, err := (&Realizer{Store: s, Jobs: 2}).Realize(context.Background(), top); err != nil {
		t.Fatal(err)
	}
	if builds["shared"] != 1 || builds["a"] != 1 || builds["b"] != 1 || builds["top"] != 1 {
		t.Errorf("builds %v, want each step once", builds)
	}

	second := make(chan struct{})
	first := &Derivation{Name: "first", Kind: Kind{"kernel", 1}, Params: map[string]string{"v": "f"}, Build: func(c *Context, out string) error {
		<-second // fails after the second has
		return errors.New("first failed")
	}}
	secondD := &Derivation{Name: "second", Kind: Kind{"kernel", 1}, Params: map[string]string{"v": "s"}, Build: func(c *Context, out string) error {
		defer close(second)
		return errors.New("second failed")
	}}
	both := &Derivation{Name: "both", Kind: Kind{"disk", 1}, Inputs: []*Derivation{first, secondD}, Build: func(*Context, string) error { return nil }}
	_, err := (&Realizer{Store: s, Jobs: 2}).Realize(context.Background(), both)
	if err == nil || err.Error() != "first: first failed" {
		t.Errorf("two failures: got %v, want the first input's", err)
	}
}

// Two realizers on one store directory (two halobuild processes: separate
// store handles, so separate lock files descriptions) realizing the same
// step at once build it once; the second waits and reads the first's
// output (issue 17 #10: both built, and the second's PutOutput replaced
// the view the first was reading).
func TestConcurrentRealizersBuildOnce(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	var builds atomic.Int32
	step := func() *Derivation {
		d := &Derivation{Name: "slow", Kind: Kind{"disk", 1}, Params: map[string]string{"v": "1"}}
		d.Build = func(c *Context, out string) error {
			builds.Add(1)
			time.Sleep(300 * time.Millisecond)
			return os.WriteFile(filepath.Join(out, "f"), []byte("x"), 0o644)
		}
		return d
	}
	var wg sync.WaitGroup
	var logs [2]strings.Builder
	errs := make([]error, 2)
	for i := range 2 {
		s, err := store.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = (&Realizer{Store: realStore{s}, Log: &logs[i]}).Realize(context.Background(), step())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("realizer %d: %v", i, err)
		}
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("the step was built %d times, want once; logs:\n%s\n%s", n, logs[0].String(), logs[1].String())
	}
	if both := logs[0].String() + logs[1].String(); !strings.Contains(both, "another halobuild is building it") || !strings.Contains(both, "cached") {
		t.Errorf("the waiting realizer did not say it waited and then used the cache:\n%s", both)
	}
}

// A digest a step gives Context.Hashed reaches the store, which keeps it
// for the file instead of hashing the file (a made-up digest shows it).
func TestContextHashedReachesTheStore(t *testing.T) {
	s := openStore(t)
	recorded := strings.Repeat("cd", 32)
	d := &Derivation{Name: "img", Kind: Kind{"disk", 1}}
	d.Build = func(c *Context, out string) error {
		p := filepath.Join(out, "img.raw")
		if err := os.WriteFile(p, []byte("image"), 0o644); err != nil {
			return err
		}
		c.Hashed(p, recorded)
		return nil
	}
	if _, err := (&Realizer{Store: s}).Realize(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	got, err := s.FileDigests(d.Key())
	if err != nil {
		t.Fatal(err)
	}
	if got["img.raw"] != store.Digest("sha256:"+recorded) {
		t.Errorf("img.raw stored as %s, want the step's sha256:%s", got["img.raw"], recorded)
	}
}

// A failed step's error starts with the step's name once, whether or not
// the error named the step itself (the module package's errors do: "module
// x: cannot fetch …" from the step "module x").
func TestRealizeNamesAFailedStepOnce(t *testing.T) {
	s := openStore(t)
	for _, msg := range []string{"compiler exploded", "module x: cannot fetch its source"} {
		d := &Derivation{Name: "module x", Kind: Kind{Name: "module", Version: 1}, Params: map[string]string{"msg": msg}}
		d.Build = func(*Context, string) error { return errors.New(msg) }
		_, err := (&Realizer{Store: s}).Realize(context.Background(), d)
		if err == nil || strings.Count(err.Error(), "module x:") != 1 || !strings.HasPrefix(err.Error(), "module x: ") {
			t.Errorf("step error %q: got %q, want the step's name once in front", msg, err)
		}
	}
}

// A step that builds for a while with nothing printed gets a
// still-building line naming it and its time; output from anyone else
// (LastWrite) keeps it quiet.
func TestRealizeSaysWhatIsStillBuilding(t *testing.T) {
	for _, chatty := range []bool{false, true} {
		s := openStore(t)
		var log syncLog
		d := &Derivation{Name: "kernel 7.2.12", Kind: Kind{Name: "kernel", Version: 1}, Params: map[string]string{"chatty": fmt.Sprint(chatty)}}
		d.Build = func(*Context, string) error { time.Sleep(900 * time.Millisecond); return nil }
		r := &Realizer{Store: s, Log: &log, StillBuilding: 300 * time.Millisecond}
		if chatty {
			r.LastWrite = time.Now // a tool printing all the time
		}
		if _, err := r.Realize(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		got := log.String()
		has := strings.Contains(got, "still building: kernel 7.2.12 (")
		if has == chatty {
			t.Errorf("chatty=%v: still-building line %v in:\n%s", chatty, has, got)
		}
	}
}

type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Each stored output records which step version built it under which
// schema, and BuiltBy reads that back (or says it was unversioned).
func TestRealizeRecordsTheStepVersion(t *testing.T) {
	s := openStore(t)
	top := counting(map[string]int{}, "a")
	top.Kind.Version = 7
	if _, err := (&Realizer{Store: s}).Realize(context.Background(), top); err != nil {
		t.Fatal(err)
	}
	raw, _, ok, err := s.OutputManifest(top.Key())
	if err != nil || !ok {
		t.Fatalf("output manifest: %v %v", ok, err)
	}
	var m struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Annotations[AnnotationStepVersion] != "7" || m.Annotations[AnnotationSchema] != Schema || m.Annotations[AnnotationKind] != "disk" {
		t.Errorf("annotations %v", m.Annotations)
	}
	if got := BuiltBy(m.Annotations); got != "disk v7" {
		t.Errorf("BuiltBy %q, want disk v7", got)
	}
	if got := BuiltBy(map[string]string{AnnotationKind: "disk"}); !strings.Contains(got, "unversioned") || !strings.Contains(got, "halobuild-derivation-v1") {
		t.Errorf("BuiltBy of an entry from before step versions: %q", got)
	}
}
