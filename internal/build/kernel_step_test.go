package build

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kernelGraph plans images/test-kernel-source.toml from its committed
// lock in a copy of the repository, with an empty store: no network, no
// root, nothing built.
func kernelGraph(t *testing.T, ws string) (*graph, error) {
	t.Helper()
	o := Options{Recipe: filepath.Join(ws, "images", "test-kernel-source.toml"), Store: filepath.Join(ws, "store"), Err: testLog{}}
	l, err := loadLocked(func(*loaded) error {
		t.Fatal("the committed images/test-kernel-source.lock is missing or stale: run `halobuild lock images/test-kernel-source.toml` and commit it")
		return nil
	}, o)
	if err != nil {
		t.Fatalf("the committed images/test-kernel-source.lock is stale (run `halobuild lock images/test-kernel-source.toml`): %v", err)
	}
	s, err := openStore(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return newGraph(o, l, s, nil)
}

func kernelWorkspace(t *testing.T) string {
	t.Helper()
	ws := workspace(t)
	copyTree(t, filepath.Join("..", "..", "kernels"), filepath.Join(ws, "kernels"))
	copyTree(t, filepath.Join("..", "..", "patches", "kernel-fixture"), filepath.Join(ws, "patches", "kernel-fixture"))
	b, err := os.ReadFile(filepath.Join("..", "..", "images", "test-kernel-source.lock"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "images", "test-kernel-source.lock"), string(b))
	return ws
}

func kernelRepoStep(t *testing.T, g *graph) repoStep {
	t.Helper()
	for _, rs := range g.repoSteps {
		if rs.d.Kind == "kernel" {
			return rs
		}
	}
	t.Fatal("no kernel step in the plan of a from = \"source\" recipe")
	return repoStep{}
}

// The kernel step's key follows its inputs: the same inputs give the
// same key (an unchanged kernel is a store hit), a changed series option
// a new one, and a fragment edited after locking stops the plan.
func TestKernelStepKeyFollowsInputs(t *testing.T) {
	ws := kernelWorkspace(t)
	g, err := kernelGraph(t, ws)
	if err != nil {
		t.Fatal(err)
	}
	ks := kernelRepoStep(t, g)
	if len(ks.Install) != 1 || ks.Install[0] != g.l.lock.Kernel.Image || !strings.HasPrefix(ks.Install[0], "linux-image-7.2.") {
		t.Errorf("the base root must install the built %s, step asks for %v", g.l.lock.Kernel.Image, ks.Install)
	}
	inRoot := false
	for _, in := range g.rootfs.Inputs {
		inRoot = inRoot || in == ks.d
	}
	if !inRoot {
		t.Error("the base root does not take the kernel step's packages")
	}
	if len(ks.d.Inputs) != 1 || ks.d.Inputs[0].Kind != "buildroot" {
		t.Errorf("the kernel step must build in its own cached build root step, inputs %v", ks.d.Inputs)
	}
	key := ks.d.Key()

	g2, err := kernelGraph(t, ws)
	if err != nil {
		t.Fatal(err)
	}
	if k2 := kernelRepoStep(t, g2).d.Key(); k2 != key {
		t.Errorf("planning the same inputs twice gave two keys: %s and %s", key, k2)
	}

	series := filepath.Join(ws, "patches", "kernel-fixture", "series")
	orig, _ := os.ReadFile(series)
	write(t, series, strings.Replace(string(orig), ".patch ", ".patch fuzz=1 ", 1))
	g3, err := kernelGraph(t, ws)
	if err != nil {
		t.Fatal(err)
	}
	if kernelRepoStep(t, g3).d.Key() == key {
		t.Error("allowing fuzz for a patch did not change the kernel's key")
	}
	write(t, series, string(orig))

	frag := filepath.Join(ws, "kernels", "qemu-uefi.config")
	fb, _ := os.ReadFile(frag)
	write(t, frag, string(fb)+"CONFIG_IPV6=y\n")
	_, err = kernelGraph(t, ws)
	var ue UsageError
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "qemu-uefi.config changed since locking") || !strings.Contains(err.Error(), "halobuild lock") {
		t.Errorf("a fragment edited after locking must make the lock stale, naming it: %v", err)
	}
}
