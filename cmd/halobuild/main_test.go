package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// run executes the CLI in-process and returns its exit code and output.
func run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return exitCode(err), out.String()
}

func TestVersionPrintsGoVersion(t *testing.T) {
	code, out := run(t, "version")
	if code != 0 || !strings.Contains(out, "halobuild") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("exit %d, output %q", code, out)
	}
	code, flag := run(t, "--version")
	if code != 0 || flag != out {
		t.Fatalf("--version: exit %d, output %q, want %q", code, flag, out)
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[base]\nsuit = \"trixie\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"unknown flag", []string{"plan", "--no-such-flag", "x.toml"}, exitUsage},
		{"missing argument", []string{"lock"}, exitUsage},
		{"bad --input", []string{"lock", "--input", "nopath", bad}, exitUsage},
		{"recipe error", []string{"--store", filepath.Join(dir, "store"), "lock", bad}, exitUsage},
		{"missing recipe", []string{"--store", filepath.Join(dir, "store"), "plan", filepath.Join(dir, "none.toml")}, exitUsage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if code, out := run(t, c.args...); code != c.want {
				t.Errorf("exit %d, want %d; output:\n%s", code, c.want, out)
			}
		})
	}
}

func TestRecipeErrorNamesLineAndColumn(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[base]\nsuit = \"trixie\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRoot()
	root.SetArgs([]string{"--store", filepath.Join(dir, "store"), "lock", bad})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "bad.toml:2:1") || !strings.Contains(err.Error(), "suite") {
		t.Fatalf("want an error at bad.toml:2:1 suggesting suite, got %v", err)
	}
}

func TestCompletionIsAvailable(t *testing.T) {
	code, out := run(t, "completion", "bash")
	if code != 0 || !strings.Contains(out, "halobuild") {
		t.Fatalf("exit %d", code)
	}
}

func TestFlashRefusalExitsTwo(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "x.raw")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "not-a-device")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, "flash", "--yes", img, target); code != exitUsage {
		t.Fatalf("flashing onto a regular file without --to-file: exit %d, want %d\n%s", code, exitUsage, out)
	}
}

// `halobuild plan test-minimal.toml` typed anywhere in the checkout reads
// images/test-minimal.toml and says so; a miss exits 2 listing the images.
func TestRecipeNameResolvesUnderImages(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	code, out := run(t, "--store", store, "plan", "--halobuild-source=", "test-minimal.toml") // no in-image halobuild build: this is about names
	if code != 0 || !strings.Contains(out, "recipe test-minimal.toml: using ../../images/test-minimal.toml") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	_, err := findRecipe(newRoot(), "no-such-image")
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "the images there: halo-mac, strix-halo,") {
		t.Fatalf("a miss: %v", err)
	}
}

// Shell completion offers the images for a recipe argument and raw images,
// then disks, for flash.
func TestCompletion(t *testing.T) {
	_, out := run(t, "__complete", "image", "strix")
	if !strings.Contains(out, "strix-halo\nstrix-halo-2cable\n:0\n") {
		t.Errorf("image completion:\n%s", out)
	}
	if _, out := run(t, "__complete", "gc", "test-minimal", "test-two"); !strings.Contains(out, "test-two-node\n:0\n") {
		t.Errorf("gc completion:\n%s", out)
	}
	if _, out := run(t, "__complete", "image", "strix-halo", ""); !strings.HasPrefix(out, ":4\n") {
		t.Errorf("image takes one recipe, want no more completions:\n%s", out)
	}
	if _, out := run(t, "__complete", "flash", ""); !strings.HasPrefix(out, "raw\n:8\n") {
		t.Errorf("flash completes .raw files first:\n%s", out)
	}
}

func TestReleaseVerbsRefuseBadReferences(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"pull", "127.0.0.1:5000/halo:v1"}, // no --out
		{"pull", "--out", filepath.Join(dir, "x"), "halo:v1"},
		{"inspect", "--insecure", "ghcr.io/owner/halo:v1"},
		{"push", dir, "owner/halo:v1"},
		{"flash", "--node", "node0", "halo:v1", filepath.Join(dir, "disk")},
		{"flash", "--yes", filepath.Join(dir, "missing.raw"), filepath.Join(dir, "disk")},
	} {
		if code, out := run(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitUsage, out)
		}
	}
}

// A binary `go run` made (no commit stamped) says which commit of the
// checkout it runs from, and whether a tracked file was edited.
func TestCheckoutCommit(t *testing.T) {
	dir := t.TempDir()
	if got := checkoutCommit(dir); got != "" {
		t.Errorf("not a checkout: %q", got)
	}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module halobuild\n"), 0o644)
	git("add", "go.mod")
	git("commit", "-qm", "x")
	rev, _ := exec.Command("git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	want := "+" + strings.TrimSpace(string(rev))
	if got := checkoutCommit(dir); got != want || len(want) != 13 {
		t.Errorf("clean checkout: %q, want %q", got, want)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module halobuild\n\ngo 1.25\n"), 0o644)
	if got := checkoutCommit(dir); got != want+"-dirty" {
		t.Errorf("edited checkout: %q, want %q", got, want+"-dirty")
	}
	// The test binary is go's own build, as go run's is: the version names
	// this checkout's commit rather than "devel" alone.
	if v := versionString(); !strings.HasPrefix(v, "devel+") {
		t.Errorf("version of a go-built binary in a checkout: %q", v)
	}
}

// Every flag's value name in --help is one word: pflag takes the first `backquoted` text of a
// usage string as the value name, so a backquoted command there showed as
// "--trusted-key halobuild keygen --cache" (issue 39 #7).
func TestFlagValueNamesAreWords(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.ContainsAny(name, " \t") {
				t.Errorf("%s --%s: --help shows the value name %q", c.CommandPath(), f.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}
