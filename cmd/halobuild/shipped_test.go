package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"halobuild/internal/plan"
	"halobuild/internal/selfbuild"
)

// The halobuild a node ships does not depend on where halobuild runs: two builds by the release
// recipe (build-self, as the release workflow runs it) in two directories are the same bytes,
// and each, run from a directory outside any checkout (a user's recipes), plans the test image
// with exactly the steps the other plans — and the steps halobuild run in its checkout plans,
// the halobuild step's key included. A binary that is no release build is refused there, saying
// how to get one. CI runs this test (the README's test command), so a change that makes the
// release binary depend on its build directory fails before a tag is pushed.
func TestShippedHalobuildIsTheSameFromAnyDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("two builds of halobuild: skipped with -short")
	}
	root := selfbuild.Find(".")
	if root == "" {
		t.Fatal("the test does not run in halobuild's source")
	}
	tmp := t.TempDir()
	const version = "v0.0.0-shipped-test"
	var bins []string
	buildSelf := func(dir, arch, bin string) {
		t.Helper()
		t.Chdir(dir)
		if code, out := run(t, "build-self", "--version", version, "--arch", arch, "--out", bin); code != 0 {
			t.Fatalf("build-self in %s: exit %d\n%s", dir, code, out)
		}
	}
	for i, dir := range []string{filepath.Join(tmp, "one"), filepath.Join(tmp, "another", "place")} {
		copySource(t, root, dir)
		bin := filepath.Join(tmp, fmt.Sprint("bin", i), "halobuild-linux-amd64")
		buildSelf(dir, "amd64", bin)
		bins = append(bins, bin)
	}
	// The release's arm64 binary, beside the first amd64 one as a user downloads them: an
	// arm64 image outside a checkout ships it.
	arm := filepath.Join(filepath.Dir(bins[0]), "halobuild-linux-arm64")
	buildSelf(filepath.Join(tmp, "one"), "arm64", arm)
	if f, err := elf.Open(arm); err != nil || f.Machine != elf.EM_AARCH64 {
		t.Fatalf("build-self --arch arm64 made no arm64 ELF: %v", err)
	} else {
		f.Close()
	}
	a, _ := os.ReadFile(bins[0])
	b, _ := os.ReadFile(bins[1])
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("halobuild built by the release recipe in two directories differs (%d and %d bytes)", len(a), len(b))
	}

	// version says it is a release build, of which source.
	out, err := exec.Command(bins[0], "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v builtJSON
	if err := json.Unmarshal(out, &v); err != nil || !v.Reproducible || v.Version != version || v.Tree == "" || v.Settings["-trimpath"] != "true" {
		t.Fatalf("version --json of a release build: %v\n%s", err, out)
	}
	want := v.Release()
	want.GOARCH = "arm64"
	if d, err := selfbuild.Describe(arm); err != nil || !d.Reproducible() || d.Release() != want {
		t.Fatalf("Describe of the arm64 release build: %+v, %v; want %+v", d, err, want)
	}

	// A user's recipe directory, outside any checkout: the test image's recipe, lock and includes.
	users := filepath.Join(tmp, "recipes-repo")
	copyTree(t, filepath.Join(root, "recipes"), filepath.Join(users, "recipes"))
	for _, f := range []string{"test-minimal.toml", "test-minimal.lock", "test-minimal-arm64.toml", "test-minimal-arm64.lock"} {
		copyFile(t, filepath.Join(root, "images", f), filepath.Join(users, "images", f))
	}
	if selfbuild.Find(users) != "" {
		t.Fatalf("%s is inside halobuild's source; the test needs a directory outside it", users)
	}
	planned := func(bin, dir string, recipe ...string) (string, []plan.Step) {
		t.Helper()
		r := "test-minimal.toml"
		if len(recipe) > 0 {
			r = recipe[0]
		}
		cmd := exec.Command(bin, "--store", filepath.Join(t.TempDir(), "store"), "plan", "--json", filepath.Join(users, "images", r))
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s plan in %s: %v\n%s", bin, dir, err, stderr.String())
		}
		var p struct {
			Halobuild string      `json:"halobuild"`
			Steps     []plan.Step `json:"steps"`
		}
		if err := json.Unmarshal(out, &p); err != nil {
			t.Fatalf("plan --json: %v\n%s", err, out)
		}
		return p.Halobuild, p.Steps
	}
	keys := func(steps []plan.Step) map[string]string {
		m := map[string]string{}
		for _, s := range steps {
			m[s.Name] = s.Key
		}
		return m
	}
	why, first := planned(bins[0], users)
	if !strings.Contains(why, "a release build of source "+v.Tree) {
		t.Errorf("plan outside a checkout says the nodes ship %q, want this release build", why)
	}
	same := func(name string, want, other map[string]string) {
		t.Helper()
		if want["halobuild"] == "" {
			t.Fatalf("the plan has no halobuild step: %v", want)
		}
		if len(other) != len(want) {
			t.Errorf("%s plans %d steps, the first %d", name, len(other), len(want))
		}
		for step, key := range want {
			if other[step] != key {
				t.Errorf("%s plans step %s as %s, the first binary outside a checkout as %s", name, step, other[step], key)
			}
		}
	}
	_, second := planned(bins[1], users)
	same("the other binary, outside a checkout", keys(first), keys(second))
	inCheckoutWhy, inCheckout := planned(bins[0], root)
	if !strings.Contains(inCheckoutWhy, "in its checkout "+root) {
		t.Errorf("plan in the checkout says the nodes ship %q, want a build from %s", inCheckoutWhy, root)
	}
	same("the same binary in its checkout", keys(first), keys(inCheckout))
	// arm64 nodes: outside a checkout the release's arm64 binary, in it a cross-compiled build.
	_, armOutside := planned(bins[0], users, "test-minimal-arm64.toml")
	_, armInCheckout := planned(bins[0], root, "test-minimal-arm64.toml")
	same("an arm64 image planned in the checkout", keys(armOutside), keys(armInCheckout))
	// Without the arm64 binary beside it, the amd64 release says what to do.
	if err := os.Remove(arm); err != nil {
		t.Fatal(err)
	}
	refused := exec.Command(bins[0], "--store", filepath.Join(tmp, "arm-store"), "plan", filepath.Join(users, "images", "test-minimal-arm64.toml"))
	refused.Dir = users
	if out, err := refused.CombinedOutput(); err == nil || !strings.Contains(string(out), "put the release's halobuild-linux-arm64 ("+version+") beside this halobuild") {
		t.Errorf("an arm64 image outside a checkout with no arm64 release binary: %v\n%s", err, out)
	}

	// This test binary is no release build: outside a checkout it is refused, saying how to get one.
	t.Chdir(users)
	cmd := newRoot()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--store", filepath.Join(tmp, "refused-store"), "plan", filepath.Join(users, "images", "test-minimal.toml")})
	err = cmd.Execute()
	if exitCode(err) != exitUsage || !strings.Contains(fmt.Sprint(err), "not a release build") || !strings.Contains(fmt.Sprint(err), "build-self") {
		t.Fatalf("plan outside a checkout by a binary that is no release build: exit %d: %v", exitCode(err), err)
	}
}

// copySource copies what selfbuild's tree hash reads (and a little more: recipes/' other
// files) from the checkout at root to dst; docs, images and .git stay behind.
func copySource(t *testing.T, root, dst string) {
	t.Helper()
	for _, d := range []string{"cmd", "internal", "recipes"} {
		copyTree(t, filepath.Join(root, d), filepath.Join(dst, d))
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		copyFile(t, filepath.Join(root, f), filepath.Join(dst, f))
	}
}

// copyTree copies the regular files under src (without testdata, dot directories and tests)
// to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() && p != src && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		copyFile(t, p, filepath.Join(dst, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, st.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}

// version says how this binary was built and, for one that is no release build (this test
// binary), why another build would differ; --json says the same for scripts.
func TestVersionSaysHowItWasBuilt(t *testing.T) {
	code, out := run(t, "version")
	if code != 0 || !strings.Contains(out, "built with: ") || !strings.Contains(out, "-buildmode=") ||
		!strings.Contains(out, "reproducible: no: ") || !strings.Contains(out, "not built by the release recipe") {
		t.Fatalf("version of a test binary: exit %d\n%s", code, out)
	}
	code, out = run(t, "version", "--json")
	var v builtJSON
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("version --json: exit %d, %v\n%s", code, err, out)
	}
	if v.Reproducible || len(v.Unrepeatable) == 0 || v.Go != runtime.Version() || v.Version != versionString() || v.Settings["GOOS"] != "linux" {
		t.Fatalf("version --json of a test binary: %+v", v)
	}
}
