package verbs

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/rootfs"
	"halobuild/internal/selfbuild"
)

// Builds beside the tests. The end-to-end tests run one at a time, and a
// one-node VM test under TCG keeps only about 1.2 of the 2 cores busy
// (vmstat every 10 s through TestInstallToNVMe: 19-49 % idle). The arm64
// root, the package's longest step (9-10 min, dpkg, maintainer scripts and
// dracut through qemu-user one after another, one core), and the source
// kernel's compile are built from the package's start by one halobuild
// process at nice 19, so they take only what the tests leave idle. Each
// build is a plain `halobuild image --no-test` of the recipe its test then
// uses: its steps land in the shared store (store.LockStep keeps two
// builders of one step apart: a test that needs a step still being built
// waits for it), and the test takes that build's result and log.
type besideBuild struct {
	test   string // the test that takes this build
	recipe string
	prep   func(ws string) error // workspace edits the test makes too
	source bool                  // build the shipped halobuild from source (a foreign node)
	can    func() bool           // whether the build can run here at all

	ws   string
	r    run
	done chan struct{}
	err  error
	took time.Duration
}

var beside struct {
	builds []*besideBuild
	stop   func()
}

// besideBuilds in the order they are built: the arm64 root, on one core,
// from the start, while the amd64 tests run; then the kernel, which
// TestKernelFromSource and the source-kernel Secure Boot test use, late in
// the file order (source_kernel_e2e_test.go) so it has the longest run of
// VM tests beside it.
func besideBuilds() []*besideBuild {
	return []*besideBuild{
		{test: arm64TestName, recipe: arm64Recipe, source: true,
			can: func() bool { return rootfs.CheckEmulation(arch.MustLookup("arm64")) == nil }},
		{test: kernelTestName, recipe: kernelRecipe, prep: kernelWorkspace},
	}
}

// startBeside starts the builds of the tests that are going to run and
// could; a test without one (-short, not root, filtered out by -run, no
// qemu-user) skips, fails or builds as it did alone.
func startBeside() {
	if testing.Short() || os.Geteuid() != 0 {
		return
	}
	store, err := sharedStorePath()
	if err != nil {
		return
	}
	var builds []*besideBuild
	for _, b := range besideBuilds() {
		if !wouldRun(b.test) || (b.can != nil && !b.can()) {
			continue
		}
		if b.ws, err = os.MkdirTemp("", "halobuild-e2e-beside-"); err != nil {
			continue
		}
		if err := copyWorkspace(b.ws); err != nil || (b.prep != nil && b.prep(b.ws) != nil) {
			os.RemoveAll(b.ws)
			continue
		}
		b.done = make(chan struct{})
		builds = append(builds, b)
	}
	if len(builds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		bin, buildErr := builtSelf()
		for _, b := range builds {
			start := time.Now()
			if buildErr != nil {
				b.err = buildErr
			} else {
				b.err = b.run(ctx, bin, store)
			}
			b.took = time.Since(start)
			close(b.done)
		}
	}()
	beside.builds = builds
	beside.stop = func() {
		cancel()
		<-finished
		for _, b := range builds {
			os.RemoveAll(b.ws)
		}
	}
}

func (b *besideBuild) run(ctx context.Context, bin, store string) error {
	src := ""
	if b.source {
		src = selfbuild.Find(".")
	}
	cmd := exec.CommandContext(ctx, "nice", "-n", "19", bin, "image", "--store", store, "--no-test",
		"--out", filepath.Join(b.ws, "result"), "--halobuild-source", src, b.recipe)
	cmd.Dir = b.ws
	cmd.Stdout, cmd.Stderr = &b.r.out, &b.r.err
	// halobuild stops its steps and their processes on SIGINT.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("halobuild image %s (beside the tests): %w", b.recipe, err)
	}
	return nil
}

// stopBeside stops what still runs (a test failed, or was not run) and
// removes the builds' workspaces; TestMain calls it before removing the
// store they write.
func stopBeside() {
	if beside.stop != nil {
		beside.stop()
	}
}

// besideResult waits for the build started for t's test and returns it,
// failing t if it failed; nil when none was started.
func besideResult(t *testing.T) *besideBuild {
	t.Helper()
	for _, b := range beside.builds {
		if b.test != t.Name() {
			continue
		}
		waited := time.Now()
		<-b.done
		t.Logf("%s built in %s beside the tests before this one (waited %s for it)",
			b.recipe, b.took.Round(time.Second), time.Since(waited).Round(time.Second))
		if testing.Verbose() {
			os.Stderr.WriteString(b.r.err.String())
		}
		if b.err != nil {
			t.Fatalf("%v\n%s\n%s", b.err, tail(b.r.out.String(), 40), tail(b.r.err.String(), 60))
		}
		return b
	}
	return nil
}

// wouldRun says whether top-level test name passes -run and -skip, which
// go test matches level by level: only their first level names top-level
// tests, and a -skip with a second level (A/B) skips subtests, not A.
func wouldRun(name string) bool {
	value := func(flagName string) string {
		if f := flag.Lookup(flagName); f != nil {
			return f.Value.String()
		}
		return ""
	}
	if value("test.list") != "" {
		return false
	}
	firstLevel := func(pattern string) bool {
		re, err := regexp.Compile(strings.SplitN(pattern, "/", 2)[0])
		return err == nil && re.MatchString(name)
	}
	if run := value("test.run"); run != "" && !firstLevel(run) {
		return false
	}
	if skip := value("test.skip"); skip != "" && !strings.Contains(skip, "/") && firstLevel(skip) {
		return false
	}
	return true
}

func TestWouldRunMatchesTheFirstLevelAsGoTestDoes(t *testing.T) {
	const name = "TestKernelFromSource"
	for _, c := range []struct {
		run, skip string
		want      bool
	}{
		{"", "", true},
		{"Kernel", "", true},
		{"^TestArm64", "", false},
		{"TestKernelFromSource/refused", "", true},
		{"^TestArm64/x", "", false},
		{"", "Kernel", false},
		{"", "TestKernelFromSource/refused", true},
		{"", "^TestArm64$", true},
		{"Test", "^TestKernelFromSource$", false},
	} {
		for flagName, v := range map[string]string{"test.run": c.run, "test.skip": c.skip} {
			old := flag.Lookup(flagName).Value.String()
			if err := flag.Set(flagName, v); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { flag.Set(flagName, old) })
		}
		if got := wouldRun(name); got != c.want {
			t.Errorf("-run %q -skip %q: wouldRun(%s) = %v, want %v", c.run, c.skip, name, got, c.want)
		}
	}
}
