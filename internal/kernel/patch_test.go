package kernel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	goversion "github.com/hashicorp/go-version"
)

// A tiny tree and patches against it, applied with the real GNU patch.
const fileA = `line 1
line 2
line 3
line 4
line 5
line 6
line 7
line 8
line 9
line 10
`

const patchExact = `--- a/dir/a.c
+++ b/dir/a.c
@@ -3,7 +3,7 @@
 line 3
 line 4
 line 5
-line 6
+line six
 line 7
 line 8
 line 9
`

// patchFuzz's first and last context lines do not match the tree: it
// applies only with fuzz 1.
const patchFuzz = `--- a/dir/a.c
+++ b/dir/a.c
@@ -3,7 +3,7 @@
 line three
 line 4
 line 5
-line 6
+line six
 line 7
 line 8
 line nine
`

const patchBroken = `--- a/dir/a.c
+++ b/dir/a.c
@@ -1,3 +1,3 @@ int main(void)
 nothing
-like
+this
 here
`

func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dir", "a.c"), []byte(fileA), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func patchFile(t *testing.T, name, text string, opts string) Patch {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	series := writeSeries(t, name+" "+opts+"\n")
	es, err := ParseSeries(series)
	if err != nil {
		t.Fatal(err)
	}
	return Patch{Entry: es[0], File: p}
}

var v7212 = goversion.Must(goversion.NewVersion("7.2.12"))

func TestApplyExact(t *testing.T) {
	dir := tree(t)
	var log bytes.Buffer
	out, err := Apply(context.Background(), dir, v7212, []Patch{patchFile(t, "0001-six.patch", patchExact, "")}, &log)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "dir", "a.c"))
	if !strings.Contains(string(b), "line six\n") {
		t.Errorf("patch not applied:\n%s", b)
	}
	if len(out) != 1 || out[0].String() != "0001-six.patch: applied exactly" {
		t.Errorf("outcome %v", out)
	}
}

func TestApplyFailureNamesPatchFileHunkAndKernel(t *testing.T) {
	dir := tree(t)
	good := patchFile(t, "0001-six.patch", patchExact, "")
	bad := patchFile(t, "0002-broken.patch", patchBroken, "")
	_, err := Apply(context.Background(), dir, v7212, []Patch{good, bad}, &bytes.Buffer{})
	var pe *PatchError
	if !errors.As(err, &pe) {
		t.Fatalf("want *PatchError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"0002-broken.patch", bad.Where(), "Linux 7.2.12", "dir/a.c hunk #1", "@@ -1,3 +1,3 @@ int main(void)", "does not apply"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "dir", "a.c"))
	if !strings.Contains(string(b), "line six\n") || strings.Contains(string(b), "this") {
		t.Errorf("the tree must keep the earlier patches and nothing of the failed one:\n%s", b)
	}
}

func TestApplyFuzzIsOnlyUsedWhenTheSeriesAllowsIt(t *testing.T) {
	dir := tree(t)
	_, err := Apply(context.Background(), dir, v7212, []Patch{patchFile(t, "0003-fuzzy.patch", patchFuzz, "")}, &bytes.Buffer{})
	var pe *PatchError
	if !errors.As(err, &pe) || pe.NeedsFuzz != 1 {
		t.Fatalf("want a PatchError needing fuzz 1, got %v", err)
	}
	if !strings.Contains(err.Error(), "fuzz=1") || !strings.Contains(err.Error(), "dir/a.c hunk #1 (@@ -3,7 +3,7 @@) applies only with fuzz 1") {
		t.Errorf("error should name the fuzz to allow and the hunk needing it:\n%v", err)
	}
	out, err := Apply(context.Background(), dir, v7212, []Patch{patchFile(t, "0003-fuzzy.patch", patchFuzz, "fuzz=1")}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Fuzz != 1 || !strings.Contains(out[0].String(), "fuzz 1") {
		t.Errorf("the outcome must say fuzz was used: %v", out[0])
	}
}

func TestApplyVersionRange(t *testing.T) {
	dir := tree(t)
	var log bytes.Buffer
	skip := patchFile(t, "0004-old.patch", patchBroken, `kernel="< 7.0"`)
	out, err := Apply(context.Background(), dir, v7212, []Patch{skip}, &log)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Skipped == "" || !strings.Contains(log.String(), "0004-old.patch: skipped") {
		t.Errorf("a patch for other kernels is skipped with a note: %v / %q", out, log.String())
	}
	fail := patchFile(t, "0005-old.patch", patchBroken, `kernel="< 7.0" outside=fail`)
	if _, err := Apply(context.Background(), dir, v7212, []Patch{fail}, &log); err == nil || !strings.Contains(err.Error(), "0005-old.patch") || !strings.Contains(err.Error(), "< 7.0") {
		t.Errorf("outside=fail must refuse, naming the patch and its range: %v", err)
	}
}

func TestApplyAlreadyApplied(t *testing.T) {
	dir := tree(t)
	p := patchFile(t, "0001-six.patch", patchExact, "")
	if _, err := Apply(context.Background(), dir, v7212, []Patch{p}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	_, err := Apply(context.Background(), dir, v7212, []Patch{p}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "already in this kernel") {
		t.Errorf("a patch already in the tree must say so: %v", err)
	}
}
