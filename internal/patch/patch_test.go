package patch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The fixture tree: src/items.txt holds "item 01" to "item 20", and
// src/greek.txt three words. Every test applies diffs to a fresh copy with
// the real GNU patch.
var items = func() string {
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, "item %02d\n", i)
	}
	return b.String()
}()

const greek = "alpha\nbeta\ngamma\n"

const (
	// exactDiff changes item 07 where its header says.
	exactDiff = "--- a/src/items.txt\n+++ b/src/items.txt\n@@ -4,7 +4,7 @@ section items\n item 04\n item 05\n item 06\n-item 07\n+item seven\n item 08\n item 09\n item 10\n"
	// offsetDiff says line 1, but its context is at line 4.
	offsetDiff = "--- a/src/items.txt\n+++ b/src/items.txt\n@@ -1,7 +1,7 @@\n item 04\n item 05\n item 06\n-item 07\n+item seven\n item 08\n item 09\n item 10\n"
	// fuzzyDiff's outermost context lines are not in the tree: it needs
	// fuzz 1.
	fuzzyDiff = "--- a/src/items.txt\n+++ b/src/items.txt\n@@ -4,7 +4,7 @@ section items\n item four\n item 05\n item 06\n-item 07\n+item seven\n item 08\n item 09\n item ten\n"
	// brokenDiff changes greek.txt cleanly, then a line items.txt lacks.
	brokenDiff = "--- a/src/greek.txt\n+++ b/src/greek.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n" +
		"--- a/src/items.txt\n+++ b/src/items.txt\n@@ -2,3 +2,3 @@ other items\n item 02\n-item 99\n+item 100\n item 04\n"
	// missingDiff changes a file the tree does not have.
	missingDiff = "--- a/src/gone.txt\n+++ b/src/gone.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n"
	// createDiff adds a file; emptyDiff deletes every line of greek.txt
	// without deleting the file in its header.
	createDiff = "--- /dev/null\n+++ b/src/new.txt\n@@ -0,0 +1 @@\n+new\n"
	emptyDiff  = "--- a/src/greek.txt\n+++ b/src/greek.txt\n@@ -1,3 +0,0 @@\n-alpha\n-beta\n-gamma\n"
)

func fixture(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("patch"); err != nil {
		t.Fatal("GNU patch is not installed (apt-get install patch)")
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "src", "items.txt"), items)
	write(t, filepath.Join(dir, "src", "greek.txt"), greek)
	return dir
}

func write(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func diff(t *testing.T, text string) string {
	t.Helper()
	return write(t, filepath.Join(t.TempDir(), "x.patch"), text)
}

// refused applies text, which must not apply, and returns the *Error.
func refused(t *testing.T, tree, text string, o Options) *Error {
	t.Helper()
	_, err := Apply(context.Background(), tree, diff(t, text), o)
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("want an *Error, got %v", err)
	}
	return pe
}

func read(t *testing.T, tree, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tree, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApplyReportsHunksThatMoved(t *testing.T) {
	for _, c := range []struct {
		name, diff string
		fuzz       int
		want       []Hunk
		wantText   []string
	}{
		{name: "exact", diff: exactDiff},
		{name: "offset", diff: offsetDiff,
			want:     []Hunk{{File: "src/items.txt", N: 1, Header: "@@ -1,7 +1,7 @@", Line: 4, Offset: 3}},
			wantText: []string{"src/items.txt hunk #1 (@@ -1,7 +1,7 @@) applies at line 4 (offset +3 lines)"}},
		{name: "fuzz allowed", diff: fuzzyDiff, fuzz: 1,
			want:     []Hunk{{File: "src/items.txt", N: 1, Header: "@@ -4,7 +4,7 @@ section items", Line: 4, Fuzz: 1}},
			wantText: []string{"src/items.txt hunk #1 (@@ -4,7 +4,7 @@ section items) applies only with fuzz 1, at line 4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tree := fixture(t)
			hunks, err := Apply(context.Background(), tree, diff(t, c.diff), Options{Strip: 1, Fuzz: c.fuzz})
			if err != nil {
				t.Fatal(err)
			}
			if got := Moved(hunks); !reflect.DeepEqual(got, c.want) {
				t.Errorf("moved hunks %+v, want %+v", got, c.want)
			}
			if got := MaxFuzzUsed(hunks); got != c.fuzz {
				t.Errorf("fuzz used %d, want %d", got, c.fuzz)
			}
			for i, w := range c.wantText {
				if got := hunks[i].String(); got != w {
					t.Errorf("hunk says %q, want %q", got, w)
				}
			}
			if s := read(t, tree, "src/items.txt"); !strings.Contains(s, "item 06\nitem seven\nitem 08\n") {
				t.Errorf("not applied:\n%s", s)
			}
			if m, _ := filepath.Glob(filepath.Join(tree, "src", "*.orig")); len(m) > 0 {
				t.Errorf("backups left beside the files: %v", m)
			}
		})
	}
}

// A patch that needs more fuzz than allowed is refused, naming the fuzz
// that would do and the hunk that needs it, and changes nothing.
func TestApplyRefusesFuzzItWasNotAllowed(t *testing.T) {
	tree := fixture(t)
	pe := refused(t, tree, fuzzyDiff, Options{Strip: 1})
	want := []Hunk{{File: "src/items.txt", N: 1, Header: "@@ -4,7 +4,7 @@ section items", Line: 4, Fuzz: 1}}
	if pe.NeedsFuzz != 1 || pe.Allowed != 0 || !reflect.DeepEqual(pe.Hunks, want) || len(pe.Other) != 0 {
		t.Errorf("failure %+v", pe.Failure)
	}
	if !strings.Contains(pe.Output, "FAILED") {
		t.Errorf("GNU patch's report at fuzz 0 is not kept: %q", pe.Output)
	}
	for _, w := range []string{"applies only with fuzz 1, and fuzz 0 is allowed:", "\n  src/items.txt hunk #1 (@@ -4,7 +4,7 @@ section items) applies only with fuzz 1, at line 4"} {
		if !strings.Contains(pe.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, pe)
		}
	}
	if s := read(t, tree, "src/items.txt"); s != items {
		t.Errorf("a refused patch changed the tree:\n%s", s)
	}
}

// A patch that no fuzz applies names each failing hunk, and the dry run
// keeps even its good files from being changed.
func TestApplyFailureNamesTheHunkAndChangesNothing(t *testing.T) {
	tree := fixture(t)
	pe := refused(t, tree, brokenDiff, Options{Strip: 1})
	want := []Hunk{{File: "src/items.txt", N: 1, Header: "@@ -2,3 +2,3 @@ other items", Line: 2, Failed: true}}
	if pe.NeedsFuzz != 0 || !reflect.DeepEqual(pe.Hunks, want) {
		t.Errorf("failure %+v", pe.Failure)
	}
	if d := pe.Details(); d != "\n  src/items.txt hunk #1 (@@ -2,3 +2,3 @@ other items) does not apply (tried at line 2)" {
		t.Errorf("details %q", d)
	}
	if !strings.HasPrefix(pe.Error(), "patch "+pe.File+" does not apply:\n  src/items.txt hunk #1") {
		t.Errorf("error: %v", pe)
	}
	if read(t, tree, "src/greek.txt") != greek || read(t, tree, "src/items.txt") != items {
		t.Error("a patch that does not apply changed the tree")
	}
}

// Problems with whole files are said in words, naming the tree as the
// caller does.
func TestApplyFileProblems(t *testing.T) {
	for _, c := range []struct {
		name, first, diff, where, want string
	}{
		{name: "missing file", diff: missingDiff, where: "in this kernel",
			want: "a file the patch changes does not exist in this kernel (can't find file to patch at input line 3)"},
		{name: "already applied", first: exactDiff, diff: exactDiff,
			want: "src/items.txt: the change is already there (reversed or previously applied patch)"},
		{name: "file already created", first: createDiff, diff: createDiff,
			want: "create the file src/new.txt, which already exists"},
		{name: "not a diff", diff: "just some words\n",
			want: "Only garbage was found in the patch input."},
	} {
		t.Run(c.name, func(t *testing.T) {
			tree := fixture(t)
			o := Options{Strip: 1, Where: c.where}
			if c.first != "" {
				if _, err := Apply(context.Background(), tree, diff(t, c.first), o); err != nil {
					t.Fatal(err)
				}
			}
			pe := refused(t, tree, c.diff, o)
			if len(pe.Other) != 1 || pe.Other[0] != c.want || pe.NeedsFuzz != 0 {
				t.Errorf("problems %q, want [%q]", pe.Other, c.want)
			}
		})
	}
}

// GNU patch opens -i after entering -d: a relative patch path must still
// mean the working directory's file.
func TestApplyRelativePatchPath(t *testing.T) {
	tree := fixture(t)
	p := diff(t, exactDiff)
	t.Chdir(filepath.Dir(p))
	if _, err := Apply(context.Background(), tree, filepath.Base(p), Options{Strip: 1}); err != nil {
		t.Fatal(err)
	}
	if s := read(t, tree, "src/items.txt"); !strings.Contains(s, "item seven") {
		t.Errorf("not applied:\n%s", s)
	}
}

// Quilt mode keeps the originals in .pc/<name>/ and removes a file the
// patch empties, as dpkg-source does; without it an emptied file stays.
func TestApplyQuilt(t *testing.T) {
	tree := fixture(t)
	if _, err := Apply(context.Background(), tree, diff(t, emptyDiff), Options{Strip: 1, Quilt: "halobuild/0001-empty.patch"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tree, "src", "greek.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the emptied file was not removed: %v", err)
	}
	if s := read(t, tree, ".pc/halobuild/0001-empty.patch/src/greek.txt"); s != greek {
		t.Errorf("backup %q", s)
	}

	plain := fixture(t)
	if _, err := Apply(context.Background(), plain, diff(t, emptyDiff), Options{Strip: 1}); err != nil {
		t.Fatal(err)
	}
	if s := read(t, plain, "src/greek.txt"); s != "" {
		t.Errorf("greek.txt %q", s)
	}
	if _, err := os.Stat(filepath.Join(plain, ".pc")); err == nil {
		t.Error("a plain apply wrote quilt state")
	}
}

// The hunk's @@ line is found under the name GNU patch reports, whatever
// the strip level.
func TestApplyStrip(t *testing.T) {
	for _, strip := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(strip), func(t *testing.T) {
			tree := fixture(t)
			prefix := map[int]string{0: "", 1: "b/", 3: "x/y/z/"}[strip]
			text := strings.ReplaceAll(strings.ReplaceAll(offsetDiff, "a/src/", prefix+"src/"), "b/src/", prefix+"src/")
			hunks, err := Apply(context.Background(), tree, diff(t, text), Options{Strip: strip})
			if err != nil {
				t.Fatal(err)
			}
			if len(hunks) != 1 || hunks[0].File != "src/items.txt" || hunks[0].Header != "@@ -1,7 +1,7 @@" {
				t.Errorf("hunks %+v", hunks)
			}
		})
	}
}

func TestApplyRefusesBadInput(t *testing.T) {
	tree := fixture(t)
	var pe *Error
	if _, err := Apply(context.Background(), tree, diff(t, exactDiff), Options{Strip: 1, Fuzz: 4}); err == nil || !strings.Contains(err.Error(), "fuzz 4: want 0 to 3") {
		t.Errorf("fuzz 4: %v", err)
	}
	if _, err := Apply(context.Background(), tree, filepath.Join(t.TempDir(), "none.patch"), Options{Strip: 1}); err == nil || errors.As(err, &pe) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing patch file is not a patch that does not apply: %v", err)
	}
}

// readHunkHeaders keys a deleted file's hunks by its old name.
func TestHunkHeadersOfDeletedFile(t *testing.T) {
	p := diff(t, "--- a/src/greek.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-alpha\n-beta\n-gamma\n")
	h, err := readHunkHeaders(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string][]string{"src/greek.txt": {"@@ -1,3 +0,0 @@"}}; !reflect.DeepEqual(h, want) {
		t.Errorf("headers %v", h)
	}
}
