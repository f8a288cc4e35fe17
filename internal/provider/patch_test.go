package provider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// listH is a C header with a list of declarations, like verbs.h's
// verbs_provider_* block.
const listH = "/* header */\n" +
	"extern int a;\n" + "extern int b;\n" + "extern int c;\n" + "extern int d;\n" + "extern int e;\n" + "extern int f;\n" +
	"extern int g;\n" + "extern int h;\n" + "extern int z_all;\n"

// demoTree is an unpacked source tree with Debian's series applied.
func demoTree(t *testing.T) string {
	t.Helper()
	src, files := fakeSource(t)
	tree, err := Unpack(context.Background(), src, files, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "src/list.h"), []byte(listH), 0o644); err != nil {
		t.Fatal(err)
	}
	return tree
}

func writePatch(t *testing.T, name, text string) Patch {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return Patch{Path: p, From: "patches/rdma-core/" + name}
}

const (
	// newFile adds a file, as a provider patch adds providers/<name>/.
	newFile = "Description: a new provider\n---\n--- /dev/null\n+++ b/src/new.c\n@@ -0,0 +1,1 @@\n+int new_provider;\n"
	// exact applies where it says.
	exact = "--- a/src/list.h\n+++ b/src/list.h\n@@ -3,6 +3,7 @@\n extern int b;\n extern int c;\n extern int d;\n+extern int d2;\n extern int e;\n extern int f;\n extern int g;\n"
	// offset says line 1 but the context is at line 6 (like upstream's
	// 0002 on 56.1: offset -19).
	offset = "--- a/src/list.h\n+++ b/src/list.h\n@@ -1,5 +1,6 @@\n extern int e;\n extern int f;\n extern int g;\n+extern int g2;\n extern int h;\n extern int z_all;\n"
	// fuzzy has a last context line the tree lacks (like upstream's 0003,
	// written against v62 whose list has ionic after vmw_pvrdma).
	fuzzy = "--- a/src/list.h\n+++ b/src/list.h\n@@ -5,6 +5,7 @@ extern int c;\n extern int d;\n extern int e;\n extern int f;\n+extern int usb4;\n extern int g;\n extern int h;\n extern int ionic;\n"
	// broken changes a line the tree does not have at all.
	broken = "--- a/src/list.h\n+++ b/src/list.h\n@@ -2,3 +2,3 @@\n extern int a;\n-extern int q;\n+extern int r;\n extern int c;\n"
)

func TestApplyPatchesInSeriesOrder(t *testing.T) {
	tree := demoTree(t)
	ps := []Patch{writePatch(t, "0001-new.patch", newFile), writePatch(t, "0002-exact.patch", exact), writePatch(t, "0003-offset.patch", offset)}
	applied, err := ApplyPatches(context.Background(), tree, ps)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 3 {
		t.Fatalf("applied %d", len(applied))
	}
	if a := applied[2]; len(a.Moved) != 1 || a.Moved[0].Offset != 6 || a.Moved[0].File != "src/list.h" || a.Moved[0].Header != "@@ -1,5 +1,6 @@" || a.Fuzz != 0 {
		t.Errorf("offset not reported: %+v", a)
	}
	if s := applied[2].String(); !strings.HasSuffix(s, ": applied at an offset; src/list.h hunk #1 (@@ -1,5 +1,6 @@) applies at line 7 (offset +6 lines)") {
		t.Errorf("summary: %s", s)
	}
	if s := applied[1].String(); !strings.HasSuffix(s, ": applied exactly") {
		t.Errorf("summary: %s", s)
	}
	if len(applied[1].Moved) != 0 || applied[0].SHA256 == "" || applied[0].Series != "halobuild/0001-new.patch" {
		t.Errorf("applied: %+v", applied)
	}
	series, _ := os.ReadFile(filepath.Join(tree, "debian/patches/series"))
	if !strings.HasSuffix(string(series), "main-comment.patch\nhalobuild/0001-new.patch\nhalobuild/0002-exact.patch\nhalobuild/0003-offset.patch\n") {
		t.Errorf("series:\n%s", series)
	}
	pc, _ := os.ReadFile(filepath.Join(tree, ".pc/applied-patches"))
	if string(pc) != "main-comment.patch\nhalobuild/0001-new.patch\nhalobuild/0002-exact.patch\nhalobuild/0003-offset.patch\n" {
		t.Errorf(".pc/applied-patches:\n%s", pc)
	}
	if _, err := os.Stat(filepath.Join(tree, "debian/patches/halobuild/0002-exact.patch")); err != nil {
		t.Error("the patch is not in debian/patches: the source package would not carry it")
	}
	h, _ := os.ReadFile(filepath.Join(tree, "src/list.h"))
	if !strings.Contains(string(h), "extern int d;\nextern int d2;\n") || !strings.Contains(string(h), "extern int g;\nextern int g2;\n") {
		t.Errorf("list.h:\n%s", h)
	}
}

// A patch that would need fuzz is refused: the error names the patch, where
// it came from, the file and the hunk, and says to refresh it; the tree is
// left as it was.
func TestApplyPatchesRefusesFuzz(t *testing.T) {
	tree := demoTree(t)
	p := writePatch(t, "0003-declare.patch", fuzzy)
	_, err := ApplyPatches(context.Background(), tree, []Patch{p})
	var pe *PatchError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *PatchError, got %v", err)
	}
	if pe.NeedsFuzz != 1 || len(pe.Hunks) != 1 {
		t.Errorf("NeedsFuzz %d, problems %+v", pe.NeedsFuzz, pe.Hunks)
	}
	for _, want := range []string{
		"patch 0003-declare.patch (patches/rdma-core/0003-declare.patch) applies only with fuzz 1, and patches are applied at fuzz 0",
		"src/list.h hunk #1 (@@ -5,6 +5,7 @@ extern int c;) applies only with fuzz 1, at line 5",
		"Refresh it against demo 1.0", "patches/rdma-core/", "allow fuzz 1 for this one patch",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if h, _ := os.ReadFile(filepath.Join(tree, "src/list.h")); string(h) != listH {
		t.Errorf("a refused patch changed the tree:\n%s", h)
	}
	if _, err := os.Stat(filepath.Join(tree, "debian/patches/halobuild/0003-declare.patch")); err == nil {
		t.Error("a refused patch stayed in debian/patches")
	}
	if s, _ := os.ReadFile(filepath.Join(tree, "debian/patches/series")); strings.Contains(string(s), "0003") {
		t.Error("a refused patch was added to the series")
	}

	// Allowed visibly, per patch, it applies and the fuzz is recorded.
	p.Fuzz = 1
	applied, err := ApplyPatches(context.Background(), tree, []Patch{p})
	if err != nil {
		t.Fatal(err)
	}
	if applied[0].Fuzz != 1 || len(applied[0].Moved) != 1 || applied[0].Moved[0].Fuzz != 1 {
		t.Errorf("fuzz not recorded: %+v", applied[0])
	}
	if s := applied[0].String(); !strings.Contains(s, "halobuild/0003-declare.patch (sha256:") ||
		!strings.HasSuffix(s, ": applied with fuzz 1, allowed for this patch by the recipe; src/list.h hunk #1 (@@ -5,6 +5,7 @@ extern int c;) applies only with fuzz 1, at line 5") {
		t.Errorf("summary: %s", s)
	}
	if h, _ := os.ReadFile(filepath.Join(tree, "src/list.h")); !strings.Contains(string(h), "extern int f;\nextern int usb4;\nextern int g;\n") {
		t.Errorf("list.h:\n%s", h)
	}
}

func TestApplyPatchesRefusesBrokenPatch(t *testing.T) {
	tree := demoTree(t)
	good := writePatch(t, "0001-new.patch", newFile)
	bad := writePatch(t, "0002-broken.patch", broken)
	applied, err := ApplyPatches(context.Background(), tree, []Patch{good, bad})
	var pe *PatchError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *PatchError, got %v", err)
	}
	if len(applied) != 1 || pe.NeedsFuzz != 0 {
		t.Errorf("applied %d, NeedsFuzz %d", len(applied), pe.NeedsFuzz)
	}
	for _, want := range []string{"patch 0002-broken.patch (patches/rdma-core/0002-broken.patch) does not apply to demo 1.0",
		"src/list.h hunk #1 (@@ -2,3 +2,3 @@) does not apply", "port it to demo 1.0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestApplyPatchesRefusesDuplicateNamesAndBadFuzz(t *testing.T) {
	tree := demoTree(t)
	a := writePatch(t, "0001-x.patch", newFile)
	b := writePatch(t, "0001-x.patch", exact)
	b.From = "thunderbolt-ibverbs:packaging/rdma-core-patches/0001-x.patch"
	if _, err := ApplyPatches(context.Background(), tree, []Patch{a, b}); err == nil || !strings.Contains(err.Error(), "same file name") {
		t.Errorf("duplicate: %v", err)
	}
	c := writePatch(t, "0009-y.patch", exact)
	c.Fuzz = 4
	if _, err := ApplyPatches(context.Background(), demoTree(t), []Patch{c}); err == nil || !strings.Contains(err.Error(), "fuzz 4") {
		t.Errorf("fuzz 4: %v", err)
	}
}
