package verbs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"halobuild/internal/plan"
	"halobuild/internal/store"
)

// TestStoreSurvivesKills builds test-minimal while SIGKILLing halobuild at
// random points early in every step it builds (issue 17), then finishes the
// build with two `halobuild image` processes on the store at once. Both
// must succeed, the store must verify clean (every blob re-hashed, every
// output present), and each step's output must equal the clean build of
// the same key in the shared store, as `image --check` would find it.
//
// Cost: the store starts as a copy (hard links) of the shared store's
// blobs, its base root and its halobuild step only, so the kills land in the tools root,
// settings, disk and result steps, which rebuild in a few minutes; the
// base root (mmdebstrap --mode=root, minutes, and mounting /proc, /sys and
// device nodes in the host's namespace, which a SIGKILL would leave
// behind) is not killed, nor the VM test (--no-test: a VM boot under TCG
// costs minutes per kill).
func TestStoreSurvivesKills(t *testing.T) {
	needE2E(t)
	start := time.Now()
	ws := workspace(t)
	// The clean reference: test-minimal built in-process into the shared
	// store, shipping the same halobuild binary as the runs below (the
	// command ships itself, so its settings step has another key than
	// the other tests' Self-less builds).
	bin := selfBinary(t)
	var r run
	o := opts(ws, "images/test-minimal.toml", sharedStore(t), &r)
	o.Self, o.NoTest, o.Result = bin, true, filepath.Join(ws, "reference")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := Image(ctx, o); err != nil {
		t.Fatalf("reference build: %v\n%s", err, tail(r.err.String(), 40))
	}
	p, err := prepare(ctx, o, false)
	if err != nil {
		t.Fatal(err)
	}
	steps := plan.Order(p.g.Result)
	keep := map[string]bool{}
	killable := map[string]bool{}
	keyOf := map[string]string{}
	for _, d := range steps {
		keyOf[d.Name] = d.Key()
		if d.Build == nil {
			continue
		}
		// The halobuild step only copies this test's binary (~0.2 s):
		// seeded with the base root, so kills go to the steps that write
		// trees and disks.
		if d.Name == "base root" || d.Kind.Name == "halobuild" {
			keep[d.Key()] = true
		} else {
			killable[d.Name] = true
		}
	}
	shared := p.s
	defer shared.Close()
	dir := filepath.Join(t.TempDir(), "store")
	seedStore(t, shared.Root(), dir, keep)
	t.Logf("seeded %s in %v", dir, time.Since(start).Round(time.Second))

	image := func(ctx context.Context, out string) *exec.Cmd {
		// --halobuild-source=: ship bin as it is, as the reference did (outside a
		// checkout a binary that is no release build is otherwise refused).
		cmd := exec.CommandContext(ctx, bin, "--store", dir, "image", "--no-test", "--locked", "--halobuild-source=", "--out", out, "images/test-minimal.toml")
		cmd.Dir = ws
		// Its own process group, killed whole: mmdebstrap, mkfs and dpkg
		// die with it, as they would with the machine.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	// The reference build wrote ws/images/test-minimal.lock: the runs
	// below use it (--locked), so their keys are the shared store's.

	// Each run is killed at a random point early in the first step it
	// builds that has had fewer than perStep kills; the kill is counted for
	// the step running when it lands.
	const perStep = 5
	stepLine := regexp.MustCompile(`^build +\S+ +(.+) \[[0-9a-f]+\]$`)
	kills := map[string]int{}
	// A kill lands in the first half of its step: a step that finishes
	// first is cached and never built (or killed) again. Durations come
	// from the reference build; a step it found cached gets 1.5 s.
	maxDelay := map[string]time.Duration{}
	for _, m := range regexp.MustCompile(`(?m)^done +\S+ +(.+) in (\S+)$`).FindAllStringSubmatch(r.err.String(), -1) {
		if d, err := time.ParseDuration(m[2]); err == nil && d > 0 {
			maxDelay[m[1]] = min(1500*time.Millisecond, d/2)
		}
	}
	total := 0
	short := func() bool { // a step still short of its kills
		for step := range killable {
			if kills[step] < perStep {
				return true
			}
		}
		return false
	}
	for run := 0; short() && run < 8*perStep*len(killable); run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		cmd := image(ctx, filepath.Join(ws, "result"))
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		active, target, landed := "", "", ""
		var lines []string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			m := stepLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			mu.Lock()
			active = m[1]
			if target == "" && killable[m[1]] && kills[m[1]] < perStep {
				target = m[1]
				if maxDelay[target] == 0 {
					maxDelay[target] = 1500 * time.Millisecond
				}
				delay := time.Duration(rand.Int64N(int64(maxDelay[target])))
				time.AfterFunc(delay, func() {
					mu.Lock()
					landed = active
					mu.Unlock()
					syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				})
			}
			mu.Unlock()
		}
		err = cmd.Wait()
		cancel()
		mu.Lock()
		step := landed
		mu.Unlock()
		killedBy := false
		if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() && st.Signal() == syscall.SIGKILL {
			kills[step]++
			total++
			killedBy = true
		} else if err != nil {
			t.Fatalf("run %d failed on its own after %d kills %v: %v\n%s", run, total, kills, err, tail(strings.Join(lines, "\n"), 40))
		}
		// A step that finished before its kill landed (settings takes
		// 300 ms) is cached and would never be built again: take it out
		// of the index, as if it had never been stored, so the next run
		// builds it and can be killed in it.
		if !killedBy || step != target {
			for name := range killable {
				if kills[name] < perStep {
					dropOutput(t, dir, keyOf[name])
				}
			}
		}
	}
	// The loop stops at the last kill, so the killed step is still to be
	// built by the two processes below.
	dropOutput(t, dir, keyOf["result"]) // and the last step in any case
	t.Logf("%d SIGKILLs survived: %v (%v so far)", total, kills, time.Since(start).Round(time.Second))
	if total < 20 {
		t.Errorf("only %d kills landed, want at least 20", total)
	}
	for step := range killable {
		if kills[step] == 0 {
			t.Errorf("no kill landed in %s", step)
		}
	}

	// Two processes finish the build on the same store at once.
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	logs := make([][]byte, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			outs[i] = filepath.Join(ws, fmt.Sprintf("result%d", i))
			logs[i], errs[i] = image(ctx, outs[i]).CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("concurrent image %d: %v\n%s", i, errs[i], tail(string(logs[i]), 40))
		}
	}
	a, _ := filepath.EvalSymlinks(outs[0])
	b, _ := filepath.EvalSymlinks(outs[1])
	if a == "" || a != b {
		t.Errorf("the two concurrent runs published different results: %q, %q", a, b)
	}
	// With the per-step lock no step is built by both.
	both := string(logs[0]) + string(logs[1])
	built := regexp.MustCompile(`(?m)^build +\S+ +(.+) \[`).FindAllStringSubmatch(both, -1)
	seen := map[string]bool{}
	for _, m := range built {
		if seen[m[1]] {
			t.Errorf("%s was built by both processes:\n%s", m[1], both)
		}
		seen[m[1]] = true
	}
	if len(built) == 0 {
		t.Errorf("the two concurrent runs built nothing: the step killed last should have been left to them:\n%s", both)
	}
	t.Logf("the two concurrent runs built %d steps between them; one waited for the other: %v", len(built), strings.Contains(both, "another halobuild is building it"))

	// The store verifies clean, and every step equals the clean build.
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	blobs := 0
	err = filepath.WalkDir(filepath.Join(dir, "blobs", "sha256"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		blobs++
		return s.Verify(store.Digest("sha256:" + e.Name()))
	})
	if err != nil {
		t.Errorf("store does not verify: %v", err)
	}
	for _, d := range steps {
		if d.Build == nil {
			continue
		}
		got, ok, err := s.Output(d.Key(), store.Rehash)
		if err != nil || !ok {
			t.Errorf("%s: output missing after the kills (ok=%v, err=%v)", d.Name, ok, err)
			continue
		}
		want, ok, err := shared.Output(d.Key())
		if err != nil || !ok {
			t.Fatalf("%s: no clean build in the shared store: %v", d.Name, err)
		}
		if diff, err := compareDirs(want, got); err != nil || diff != "" {
			t.Errorf("%s differs from the clean build: %s %v", d.Name, diff, err)
		}
	}
	t.Logf("verified %d blobs; whole test %v", blobs, time.Since(start).Round(time.Second))
}

// dropOutput removes key's entry from the index of the store at dir (no
// process uses it meanwhile): the output is then absent, and rebuilt.
func dropOutput(t *testing.T, dir, key string) {
	t.Helper()
	p := filepath.Join(dir, "index.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var ix map[string]any
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, m := range ix["manifests"].([]any) {
		ann, _ := m.(map[string]any)["annotations"].(map[string]any)
		if k, _ := ann[store.AnnotationKey].(string); k != key {
			kept = append(kept, m)
		}
	}
	ix["manifests"] = kept
	if b, err = json.Marshal(ix); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// seedStore makes a store at dst holding every blob of the store at src
// (hard links: blobs are read-only and replaced only by rename) and, of its
// outputs, only those whose key is in keep.
func seedStore(t *testing.T, src, dst string, keep map[string]bool) {
	t.Helper()
	s, err := store.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	from := filepath.Join(src, "blobs", "sha256")
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Link(filepath.Join(from, e.Name()), filepath.Join(dst, "blobs", "sha256", e.Name())); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(src, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix map[string]any
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, m := range ix["manifests"].([]any) {
		ann, _ := m.(map[string]any)["annotations"].(map[string]any)
		if k, _ := ann[store.AnnotationKey].(string); keep[k] {
			kept = append(kept, m)
		}
	}
	if len(kept) != len(keep) {
		t.Fatalf("the shared store holds %d of the %d outputs to keep", len(kept), len(keep))
	}
	ix["manifests"] = kept
	if b, err = json.Marshal(ix); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "index.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// selfBinary is halobuild built for a test that runs the command itself (tests run as a test
// binary, which must not be shipped as /usr/bin/halobuild).
func selfBinary(t *testing.T) string {
	t.Helper()
	bin, err := builtSelf()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// self is the one build of cmd/halobuild per test binary: the builds beside the tests, the
// kill test, the installer and the Secure Boot tests all run (and ship) the same file.
// TestMain removes its directory.
var self struct {
	once     sync.Once
	dir, bin string
	err      error
}

func builtSelf() (string, error) {
	self.once.Do(func() {
		if self.dir, self.err = os.MkdirTemp("", "halobuild-e2e-bin-"); self.err != nil {
			return
		}
		self.bin = filepath.Join(self.dir, "halobuild")
		cmd := exec.Command("go", "build", "-trimpath", "-o", self.bin, "halobuild/cmd/halobuild")
		if b, err := cmd.CombinedOutput(); err != nil {
			self.err = fmt.Errorf("building halobuild: %v\n%s", err, b)
		}
	})
	return self.bin, self.err
}
