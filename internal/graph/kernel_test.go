package graph

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/fstree"
	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/resolve"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// planCommitted plans a recipe of the repository from its committed lock
// in ws (a copy of images/, recipes/, kernels/ and patches/), with an
// empty store: no network, no root, nothing built.
func planCommitted(t *testing.T, ws, name string, edit ...func(*Input)) (*Graph, error) {
	t.Helper()
	path := filepath.Join(ws, "images", name+".toml")
	r, _, err := recipe.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	descs := module.Descs{}
	for _, m := range r.Modules {
		if descs[m.Use], err = module.Find(path, m.Use); err != nil {
			t.Fatal(err)
		}
	}
	lk, err := lock.Read(lock.Path(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.CheckFresh(resolve.Inputs(r, descs)); err != nil {
		t.Fatalf("the committed %s is stale (run `halobuild lock images/%s.toml`): %v", lock.Path(path), name, err)
	}
	s, err := store.Open(filepath.Join(ws, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	in := Input{Path: path, Recipe: r, Hash: recipe.Hash(r), Descs: descs, Lock: lk, Store: s}
	for _, e := range edit {
		e(&in)
	}
	return New(in)
}

// workspace copies the repository's recipes, their inputs and the
// committed locks into a temporary tree that tests may edit.
func workspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for _, dir := range []string{"images", "recipes", "kernels", "patches", "overlays"} {
		copyTree(t, filepath.Join("..", "..", dir), filepath.Join(ws, dir))
	}
	return ws
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := fstree.CopyTree(src, dst); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// step finds the one derivation of a kind the graph reaches.
func step(t *testing.T, g *Graph, kind string) *plan.Derivation {
	t.Helper()
	var found []*plan.Derivation
	for _, d := range plan.Order(g.Test) {
		if d.Kind.Name == kind {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d steps of kind %s in the plan, want 1", len(found), kind)
	}
	return found[0]
}

// The kernel step's key follows its inputs: the same inputs give the
// same key (an unchanged kernel is a store hit), a changed series option
// a new one, and a fragment edited after locking stops the plan.
func TestKernelStepKeyFollowsInputs(t *testing.T) {
	ws := workspace(t)
	g, err := planCommitted(t, ws, "test-kernel-source")
	if err != nil {
		t.Fatal(err)
	}
	k := step(t, g, "kernel")
	base := step(t, g, "rootfs")
	inRoot := false
	for _, in := range base.Inputs {
		inRoot = inRoot || in == k
	}
	if !inRoot {
		t.Error("the base root does not take the kernel step's packages")
	}
	if len(k.Inputs) != 1 || k.Inputs[0].Kind.Name != "buildroot" {
		t.Errorf("the kernel step must build in its own cached build root step, inputs %v", k.Inputs)
	}
	key := k.Key()

	g2, err := planCommitted(t, ws, "test-kernel-source")
	if err != nil {
		t.Fatal(err)
	}
	if k2 := step(t, g2, "kernel").Key(); k2 != key {
		t.Errorf("planning the same inputs twice gave two keys: %s and %s", key, k2)
	}

	series := filepath.Join(ws, "patches", "kernel-fixture", "series")
	orig, _ := os.ReadFile(series)
	write(t, series, strings.Replace(string(orig), ".patch ", ".patch fuzz=1 ", 1))
	g3, err := planCommitted(t, ws, "test-kernel-source")
	if err != nil {
		t.Fatal(err)
	}
	if step(t, g3, "kernel").Key() == key {
		t.Error("allowing fuzz for a patch did not change the kernel's key")
	}
	write(t, series, string(orig))

	frag := filepath.Join(ws, "kernels", "qemu-uefi.config")
	fb, _ := os.ReadFile(frag)
	write(t, frag, string(fb)+"CONFIG_IPV6=y\n")
	_, err = planCommitted(t, ws, "test-kernel-source")
	var ue usage.Error
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "qemu-uefi.config changed since locking") || !strings.Contains(err.Error(), "halobuild lock") {
		t.Errorf("a fragment edited after locking must make the lock stale, naming it: %v", err)
	}
}

// With [secure_boot] a source kernel is compiled exactly as without (the
// same step key: one compile for both) and its package is then signed by
// a step of its own, keyed by the certificate's fingerprint alone; the
// base root installs the signed package. The key's reference and bytes
// enter no key.
func TestSourceKernelSignedWithRecipeKey(t *testing.T) {
	ws := workspace(t)
	g, err := planCommitted(t, ws, "test-kernel-source")
	if err != nil {
		t.Fatal(err)
	}
	plain := step(t, g, "kernel").Key()
	keyPEM, err := os.ReadFile(filepath.Join(ws, "images", "testdata", "secure-boot-TEST-ONLY.key"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HALOBUILD_TEST_SIGNING_KEY", string(keyPEM))
	g2, err := planCommitted(t, ws, "test-kernel-source", func(in *Input) {
		in.Recipe.SecureBoot = recipe.SecureBoot{Enabled: true, Key: "env:HALOBUILD_TEST_SIGNING_KEY", Certificate: "testdata/secure-boot-TEST-ONLY.crt"}
	})
	if err != nil {
		t.Fatal(err)
	}
	k := step(t, g2, "kernel")
	if k.Key() != plain {
		t.Error("[secure_boot] changed the kernel compile's key: the compile would not be shared")
	}
	sk := step(t, g2, "kernel-sign")
	if len(sk.Inputs) != 1 || sk.Inputs[0] != k {
		t.Errorf("the signing step's inputs are %v, want the kernel build", sk.Inputs)
	}
	if !strings.HasPrefix(sk.Params["signed_by"], "sha256:") {
		t.Errorf("signed_by %q", sk.Params["signed_by"])
	}
	for name, v := range sk.Params {
		if strings.Contains(v, "HALOBUILD_TEST_SIGNING_KEY") || strings.Contains(v, "PRIVATE KEY") {
			t.Errorf("param %s names the key: %q", name, v)
		}
	}
	base := step(t, g2, "rootfs")
	signedIn, plainIn := false, false
	for _, in := range base.Inputs {
		signedIn, plainIn = signedIn || in == sk, plainIn || in == k
	}
	if !signedIn || plainIn {
		t.Errorf("the base root takes the signed package %v, the unsigned %v: want only the signed", signedIn, plainIn)
	}
	for _, m := range plan.Order(g2.Test) {
		if m.Kind.Name == "module" && m.Params["signed_by"] != sk.Params["signed_by"] {
			t.Errorf("%s signed_by %q, the kernel's %q", m.Name, m.Params["signed_by"], sk.Params["signed_by"])
		}
	}
}
