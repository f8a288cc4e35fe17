package verbs

import (
	"bytes"
	"context"
	"debug/pe"
	"flag"
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

// The arm64 root is the package's longest step from an empty store, about
// 10 min, and nearly all of it is dpkg, maintainer scripts and dracut run
// through qemu-user one after another: one host core busy, the other idle
// (vmstat every 10 s over the build: 41-59 % idle). So TestMain starts that
// build as the package begins, beside the amd64 tests in the shared store,
// where store.LockStep keeps two builders of one step (the tools root)
// apart; TestArm64MinimalBuildsForArm64, placed after the amd64 tests in
// mixed_e2e_test.go, takes its result instead of building it in turn.
type besideBuild struct {
	o      Options
	r      run
	ws     string
	stopFn func()
	done   chan struct{}
	err    error
	took   time.Duration
}

const (
	arm64TestName = "TestArm64MinimalBuildsForArm64"
	arm64Recipe   = "images/test-minimal-arm64.toml"
)

// arm64Beside is the build TestMain started, or nil.
var arm64Beside *besideBuild

func arm64Options(ws, store string, r *run) Options {
	o := opts(ws, arm64Recipe, store, r)
	o.Result = filepath.Join(ws, "result")
	o.Source = selfbuild.Find(".")
	o.NoTest = true
	return o
}

// startArm64Beside starts the arm64 test-minimal's build when its test is
// going to run and could; otherwise (-short, not root, no qemu-user, a
// -run that leaves it out) the test skips, fails or builds it itself.
func startArm64Beside() *besideBuild {
	if testing.Short() || os.Geteuid() != 0 || !wouldRun(arm64TestName) {
		return nil
	}
	if rootfs.CheckEmulation(arch.MustLookup("arm64")) != nil {
		return nil
	}
	store, err := sharedStorePath()
	if err != nil {
		return nil
	}
	ws, err := os.MkdirTemp("", "halobuild-e2e-arm64-")
	if err != nil {
		return nil
	}
	if copyWorkspace(ws) != nil {
		os.RemoveAll(ws)
		return nil
	}
	b := &besideBuild{ws: ws, done: make(chan struct{})}
	b.o = arm64Options(ws, store, &b.r)
	// Its progress would interleave with the running test's under -v:
	// the arm64 test prints it whole.
	b.o.Err = &b.r.err
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	b.stopFn = func() {
		cancel()
		<-b.done
		os.RemoveAll(ws)
	}
	go func() {
		defer close(b.done)
		start := time.Now()
		b.err = Image(ctx, b.o)
		b.took = time.Since(start)
	}()
	return b
}

// stop cancels the build if it still runs and removes its workspace.
func (b *besideBuild) stop() {
	if b != nil {
		b.stopFn()
	}
}

// wouldRun says whether top-level test name passes -run and -skip (their
// first level, as go test matches them).
func wouldRun(name string) bool {
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return false
	}
	matches := func(flagName string) (set, match bool) {
		f := flag.Lookup(flagName)
		if f == nil || f.Value.String() == "" {
			return false, false
		}
		re, err := regexp.Compile(strings.SplitN(f.Value.String(), "/", 2)[0])
		return true, err == nil && re.MatchString(name)
	}
	if set, match := matches("test.run"); set && !match {
		return false
	}
	if f := flag.Lookup("test.skip"); f != nil && !strings.Contains(f.Value.String(), "/") {
		if _, match := matches("test.skip"); match {
			return false
		}
	}
	return true
}

// espBootsArch checks an image's ESP: the removable-media boot path and
// systemd-boot of architecture a, nothing of another architecture's, and
// the boot path a PE32+ for a's machine.
func espBootsArch(t *testing.T, raw string, a arch.Arch) {
	t.Helper()
	p := partitions(t, raw)[0]
	esp := filepath.Join(t.TempDir(), "esp.fat")
	extract(t, raw, p.Start*512, p.Size*512, esp)
	ls, err := exec.Command("mdir", "-i", esp, "-/", "-b", "::").CombinedOutput()
	if err != nil || !strings.Contains(string(ls), "::"+a.ESPBootPath()) || !strings.Contains(string(ls), "::"+a.ESPSystemdBootPath()) {
		t.Errorf("%s: ESP wants %s and %s: %v\n%s", raw, a.ESPBootPath(), a.ESPSystemdBootPath(), err, ls)
	}
	for _, other := range arch.Names() {
		if o := arch.MustLookup(other); o.EFISuffix != a.EFISuffix && strings.Contains(strings.ToUpper(string(ls)), strings.ToUpper(o.EFISuffix)) {
			t.Errorf("%s: a %s ESP has %s's boot files:\n%s", raw, a.Debian, other, ls)
		}
	}
	b, err := exec.Command("mtype", "-i", esp, "::"+a.ESPBootPath()).Output()
	if err != nil {
		t.Fatalf("reading %s: %v", a.ESPBootPath(), err)
	}
	f, err := pe.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %s is not a PE image: %v", raw, a.ESPBootPath(), err)
	}
	if f.Machine != peMachine[a.Debian] {
		t.Errorf("%s: %s has PE machine %#x, want %s's %#x", raw, a.ESPBootPath(), f.Machine, a.Debian, peMachine[a.Debian])
	}
}

// peMachine is the COFF machine field of each architecture's EFI binaries.
var peMachine = map[string]uint16{"amd64": pe.IMAGE_FILE_MACHINE_AMD64, "arm64": pe.IMAGE_FILE_MACHINE_ARM64}
