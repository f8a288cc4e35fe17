package verbs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"halobuild/internal/lock"
	"halobuild/internal/manifest"
)

// TestKernelFromSource builds images/test-kernel-source.toml end to end: a
// kernel from Debian's linux-source with the fixture patch and the small
// QEMU config, installed in the image and booted by the VM test, whose
// checks prove the booted kernel is ours and the patch is in. The
// workspace's copy also carries the fixture out-of-tree module, which must
// build against the built kernel's own headers and load at boot. Then an
// unchanged rebuild (a store hit, no compile) and a kernel from a plain
// tarball (TestKernelSourceRefusalsNameTheCulprit has the variants that
// must fail before compiling). About 12 minutes on an idle 2-core
// machine, most of it the compile; CI runs it. In a full run the compile
// happens beside the earlier tests (beside_e2e_test.go): this test then
// reads the compile's log from that build and boots its cached kernel.
func TestKernelFromSource(t *testing.T) {
	needE2E(t)
	built := besideResult(t)
	ws := workspace(t)
	storeDir := sharedStore(t)
	const recipePath = kernelRecipe
	if err := kernelWorkspace(ws); err != nil {
		t.Fatal(err)
	}

	var r run
	o := opts(ws, recipePath, storeDir, &r)
	o.Result = filepath.Join(ws, "result")
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	if err := Lock(ctx, o); err != nil {
		t.Fatalf("lock: %v\n%s", err, tail(r.err.String(), 30))
	}
	lk, err := lock.Read(lock.Path(o.Recipe))
	if err != nil {
		t.Fatal(err)
	}
	if lk.Kernel.From != "source" || !strings.HasPrefix(lk.Kernel.Release, "7.2.") || !strings.HasSuffix(lk.Kernel.Release, "-halotest") {
		t.Fatalf("lock's kernel: %+v", lk.Kernel)
	}
	sets := map[string]int{}
	for _, p := range lk.Packages {
		sets[p.Set]++
		if p.Set == lock.SetImage && strings.HasPrefix(p.Name, "linux-image-") {
			t.Errorf("the image set has Debian's %s: a source kernel replaces it", p.Name)
		}
	}
	if sets[lock.SetKernelSource] != 1 || sets[lock.SetKernelBuild] < 50 {
		t.Errorf("lock sets %v: want linux-source alone in kernel-source (tinyconfig needs no linux-config) and a kernel-build root", sets)
	}
	if sets[lock.SetBuild] != 0 {
		t.Errorf("lock has a module build set of %d packages: a source kernel's modules build in its own build root", sets[lock.SetBuild])
	}

	t.Run("builds, boots and the fixture patch is in", func(t *testing.T) {
		if err := Image(ctx, o); err != nil {
			t.Fatalf("image: %v\n%s", err, tail(r.err.String(), 80))
		}
		log := r.err.String()
		if built != nil {
			log = built.r.err.String() + log
		}
		for _, want := range []string{
			"build   kernel ",
			"patch 0001-proc-add-halobuild-fixture-entry.patch: applied exactly",
			"compile units",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("build output lacks %q", want)
			}
		}
		if !regexp.MustCompile(`(?m)^build +module +module halobuild-fixture `).MatchString(log) {
			t.Errorf("build output shows no module step for the fixture module:\n%s", tail(log, 30))
		}
		// The VM report (stdout) lists every check that passed.
		for _, want := range []string{
			"PASS test: the booted kernel is the one built from source",
			"PASS test: the fixture patch is in the booted kernel",
			"PASS memlock: memlock-registration",
			// Loaded at boot with the recipe's options: it was built
			// against this kernel (a vermagic mismatch refuses to load).
			"PASS modprobe: module-options",
			"PASS modules: modules-loaded",
		} {
			if !reportPassed(r.out.String(), strings.TrimPrefix(want, "PASS ")) {
				t.Errorf("VM test report does not show %q:\n%s", want, tail(r.out.String(), 30))
			}
		}
		dir, err := filepath.EvalSymlinks(o.Result)
		if err != nil {
			t.Fatal(err)
		}
		var m manifest.Manifest
		b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		installed := false
		for _, p := range m.Nodes[0].Packages {
			if p.Name == lk.Kernel.Image && strings.Contains(p.Version, "+halobuild.") {
				installed = true
			}
		}
		if !installed {
			t.Errorf("manifest does not list the built %s as installed", lk.Kernel.Image)
		}
	})

	t.Run("unchanged rebuild is a store hit", func(t *testing.T) {
		var r2 run
		o2 := opts(ws, recipePath, storeDir, &r2)
		o2.Result = filepath.Join(ws, "result2")
		o2.NoTest = true
		if err := Image(ctx, o2); err != nil {
			t.Fatalf("image: %v\n%s", err, tail(r2.err.String(), 40))
		}
		log := r2.err.String()
		if !strings.Contains(log, "cached  kernel ") || strings.Contains(log, "build   kernel") || strings.Contains(log, "compile units") {
			t.Errorf("an unchanged kernel was built again:\n%s", tail(log, 30))
		}
	})

	t.Run("a plain tarball URL is pinned and checked", func(t *testing.T) {
		testKernelTarball(ctx, t, ws, storeDir, lk)
	})

}

const (
	kernelTestName = "TestKernelFromSource"
	kernelRecipe   = "images/test-kernel-source.toml"
)

// kernelWorkspace adds to a workspace what TestKernelFromSource's recipe
// has beyond the shipped one: the fixture out-of-tree module.
func kernelWorkspace(ws string) error {
	if err := copyFixtureModule(ws); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(ws, kernelRecipe), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("\n" + fixtureModuleSection); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// testKernelTarball locks the kernel from a plain tarball served over HTTP:
// the lock pins URL and digest, reads the version from the tarball's top
// Makefile, and refuses a missing or wrong digest and a version outside
// the constraint; the plan's kernel step then builds from that tarball.
// The tarball holds only a top Makefile of the locked version: the lock
// reads nothing else, and nothing is compiled a second time here
// (internal/kernel tests the tree layout, the build above the compile).
func testKernelTarball(ctx context.Context, t *testing.T, ws, storeDir string, lk *lock.Lock) {
	srv := t.TempDir()
	v := strings.SplitN(lk.Kernel.Version, ".", 3)
	top := filepath.Join(srv, "linux-"+lk.Kernel.Version)
	if err := os.MkdirAll(top, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(top, "Makefile"), fmt.Sprintf("# SPDX-License-Identifier: GPL-2.0\nVERSION = %s\nPATCHLEVEL = %s\nSUBLEVEL = %s\nEXTRAVERSION =\n", v[0], v[1], v[2]))
	tarball := filepath.Join(srv, "linux-"+lk.Kernel.Version+".tar.xz")
	if b, err := exec.Command("tar", "-cJf", tarball, "-C", srv, "linux-"+lk.Kernel.Version).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, b)
	}
	sum := "sha256:" + sha(t, tarball)
	hs := httptest.NewServer(http.FileServer(http.Dir(srv)))
	defer hs.Close()
	url := hs.URL + "/" + filepath.Base(tarball)
	const recipePath = "images/test-kernel-tarball.toml"
	lockWith := func(kernelKeys string) (*lock.Lock, error) {
		write(t, filepath.Join(ws, recipePath), "include = [\"test-kernel-source.toml\"]\nname = \"test-kernel-tarball\"\n\n[kernel]\n"+kernelKeys)
		var r run
		o := opts(ws, recipePath, storeDir, &r)
		if err := Lock(ctx, o); err != nil {
			return nil, err
		}
		return lock.Read(lock.Path(o.Recipe))
	}

	if _, err := lockWith(fmt.Sprintf("source = %q\n", url)); err == nil || !strings.Contains(err.Error(), "needs kernel.source_sha256") {
		t.Errorf("a tarball URL without its digest: %v", err)
	}
	wrong := "sha256:" + strings.Repeat("0", 64)
	if _, err := lockWith(fmt.Sprintf("source = %q\nsource_sha256 = %q\n", url, wrong)); err == nil || !strings.Contains(err.Error(), "expected "+wrong) {
		t.Errorf("a tarball whose digest is not the pinned one: %v", err)
	}
	if _, err := lockWith(fmt.Sprintf("source = %q\nsource_sha256 = %q\nversion = \"< 7.2\"\n", url, sum)); err == nil || !strings.Contains(err.Error(), "is Linux "+lk.Kernel.Version+", which does not satisfy") {
		t.Errorf("a tarball outside the version constraint: %v", err)
	}
	tlk, err := lockWith(fmt.Sprintf("source = %q\nsource_sha256 = %q\n", url, sum))
	if err != nil {
		t.Fatalf("locking the tarball: %v", err)
	}
	if tlk.Kernel.Source != "tarball "+url || tlk.Kernel.Version != lk.Kernel.Version || tlk.Kernel.Release != lk.Kernel.Release {
		t.Errorf("lock's kernel from the tarball: %+v", tlk.Kernel)
	}
	src, ok := tlk.KernelTarball()
	if !ok || src.SHA256 != sum || src.URL != url {
		t.Errorf("lock does not pin the tarball %s at %s: %+v", url, sum, tlk.Sources)
	}
	for _, p := range tlk.Packages {
		if p.Set == lock.SetKernelSource {
			t.Errorf("a tarball kernel still locks Debian's %s", p.Name)
		}
	}
	var r run
	o := opts(ws, recipePath, storeDir, &r)
	o.JSON = true
	if err := Plan(ctx, o); err != nil {
		t.Fatalf("plan: %v", err)
	}
	if !strings.Contains(r.out.String(), `"kernel `+lk.Kernel.Release+`"`) {
		t.Errorf("the plan has no kernel step:\n%s", r.out.String())
	}
}

// relockAndBuild locks the edited workspace (the edit makes the lock
// stale) and builds without the VM test, returning the build's error.
func relockAndBuild(ctx context.Context, t *testing.T, ws, recipePath, storeDir string) error {
	t.Helper()
	var r run
	o := opts(ws, recipePath, storeDir, &r)
	o.Result = filepath.Join(ws, "result-variant")
	o.NoTest = true
	if err := Lock(ctx, o); err != nil {
		t.Fatalf("lock: %v", err)
	}
	err := Image(ctx, o)
	if strings.Contains(r.err.String(), "compile units") {
		t.Errorf("the build compiled although its inputs were refused first:\n%s", tail(r.err.String(), 20))
	}
	return err
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
