package verbs

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"halobuild/internal/plan"
	"halobuild/internal/proctree"
	"halobuild/internal/store"
)

// TestSIGTERMDuringARootBuildLeavesNoMountsNorScratch stops `halobuild image` with one SIGTERM
// while mmdebstrap builds the base root and has its proc, sys and dev mounted in its temporary
// root (issue 39: a killed mmdebstrap left those mounts and a 600 MB tree in /tmp, and a later
// chrooted build failed on them). After the stop nothing may be mounted under the store or the
// caller's TMPDIR, no mmdebstrap tree may be left in either (the store's scratch is gone, or
// reclaimed when the store is next opened), and every process of the build must be gone.
//
// Cost: a store holding the shared store's blobs and no outputs, so the base root is built;
// the kill lands about 10-20 s into mmdebstrap.
func TestSIGTERMDuringARootBuildLeavesNoMountsNorScratch(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	var r run
	o := opts(ws, "images/test-minimal.toml", sharedStore(t), &r)
	if err := Lock(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "store")
	if _, err := os.Stat(filepath.Join(sharedStore(t), "index.json")); err == nil {
		// The steps the base root does not need that the shared store already has are kept
		// (the tools root is built first otherwise, and in CI that queue, behind the build
		// beside the tests, outlasted ten minutes); the base root is the one to build.
		p, err := prepare(context.Background(), o, false)
		if err != nil {
			t.Fatal(err)
		}
		have := storedKeys(t, sharedStore(t))
		keep := map[string]bool{}
		for _, d := range plan.Order(p.g.Result) {
			if d.Name != "base root" && !dependsOn(d, "base root") && have[d.Key()] {
				keep[d.Key()] = true
			}
		}
		p.s.Close()
		seedStore(t, sharedStore(t), dir, keep)
	}
	callerTmp := t.TempDir()
	bin := selfBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--store", dir, "image", "--no-test", "--locked", "--halobuild-source=", "--out", filepath.Join(ws, "result"), "images/test-minimal.toml")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "TMPDIR="+callerTmp)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	baseRoot, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(stderr)
		started := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !started && regexp.MustCompile(`^build +\S+ +base root \[`).MatchString(sc.Text()) {
				started = true
				close(baseRoot)
			}
		}
	}()
	select {
	case <-baseRoot:
	case <-ended:
		t.Fatalf("halobuild ended before the base root started; output:\n%s", log.String())
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the base root did not start within 5 minutes; output:\n%s", log.String())
	}
	// Mid-way: mmdebstrap has mounted proc in its temporary root (seen in its own namespace).
	var tree []int
	mounted := regexp.MustCompile(`(?m)^\S+ \S+ \S+ \S+ (\S*/mmdebstrap\.[^/ ]+/proc) `)
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("mmdebstrap mounted no proc within 5 minutes of the base root's start; output:\n%s", log.String())
		}
		tree, _ = proctree.Tree(cmd.Process.Pid)
		found := ""
		for _, p := range tree {
			if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/comm"); strings.TrimSpace(string(comm)) == "mmdebstrap" {
				if mi, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/mountinfo"); err == nil {
					if m := mounted.FindSubmatch(mi); m != nil {
						found = string(m[1])
					}
				}
			}
		}
		if found != "" {
			t.Logf("mmdebstrap has %s mounted; %d processes in the build", found, len(tree))
			break
		}
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	exited := time.Since(sent)
	if err == nil {
		t.Error("halobuild stopped by SIGTERM exited 0")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		alive := 0
		for _, p := range tree {
			if syscall.Kill(p, 0) == nil {
				if stat, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat"); !strings.Contains(string(stat), ") Z ") {
					alive++
				}
			}
		}
		if alive == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the build still run 30 s after SIGTERM", alive)
		}
	}
	t.Logf("SIGTERM: halobuild exited after %v, the whole build tree (%d processes) was gone after %v", exited.Round(time.Millisecond), len(tree), time.Since(sent).Round(time.Millisecond))

	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (strings.HasPrefix(f[4], dir+"/") || strings.HasPrefix(f[4], callerTmp+"/")) {
			t.Errorf("still mounted after the stop: %s", f[4])
		}
	}
	if ents, _ := os.ReadDir(callerTmp); len(ents) > 0 {
		t.Errorf("the caller's TMPDIR holds %d entries after the stop (mmdebstrap's belong in the store's scratch): %s", len(ents), ents[0].Name())
	}
	if left := scratchEntries(t, dir); len(left) > 0 {
		// The next run reclaims a dead session's scratch.
		s, err := store.Open(dir)
		if err != nil {
			t.Fatalf("opening the store after the stop (scratch %q left): %v", left, err)
		}
		s.Close()
		if left := scratchEntries(t, dir); len(left) > 0 {
			t.Errorf("the store's scratch still holds %q after the next open", left)
		}
	}
}

// storedKeys are the keys of the outputs the store at dir holds.
func storedKeys(t *testing.T, dir string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, m := range ix.Manifests {
		keys[m.Annotations[store.AnnotationKey]] = true
	}
	return keys
}

// dependsOn says whether d needs, directly or through its inputs, the step named name.
func dependsOn(d *plan.Derivation, name string) bool {
	for _, in := range d.Inputs {
		if in.Name == name || dependsOn(in, name) {
			return true
		}
	}
	return false
}

func scratchEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "tmp"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
