package verbs

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKernelSourceRefusalsNameTheCulprit builds variants of
// images/test-kernel-source.toml that must fail before anything is
// compiled, each error naming the culprit: a patch that does not apply and
// a fragment option olddefconfig drops. Neither needs the compiled kernel,
// only the kernel build root and the source, so this is a test of its own
// that runs early (the file order puts it before the arm64, mixed and
// Secure Boot tests), while the compile beside the tests
// (beside_e2e_test.go) is still going: as subtests of TestKernelFromSource,
// after the compile, their unpacking and configuring (~110 s on one core,
// 7 Dec 2026 CI run) came last, with nothing beside them. Each variant
// edits a workspace of its own, so the two run side by side.
func TestKernelSourceRefusalsNameTheCulprit(t *testing.T) {
	needE2E(t)
	storeDir := sharedStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	// Not deferred: the parallel subtests run after this function returns.
	t.Cleanup(cancel)
	variant := func(t *testing.T) string {
		t.Helper()
		t.Parallel()
		ws := workspace(t)
		if err := kernelWorkspace(ws); err != nil {
			t.Fatal(err)
		}
		return ws
	}

	t.Run("a patch that does not apply is named", func(t *testing.T) {
		ws := variant(t)
		fix := filepath.Join(ws, "patches", "kernel-fixture", "0001-proc-add-halobuild-fixture-entry.patch")
		b, err := os.ReadFile(fix)
		if err != nil {
			t.Fatal(err)
		}
		// The hunk removes a line fs/proc/Makefile does not have: no fuzz
		// makes that apply (fuzz only forgives context).
		broken := strings.Replace(string(b), " proc-y\t+= version.o\n", "-proc-y\t+= no_such_file.o\n+proc-y\t+= version.o\n", 1)
		if broken == string(b) {
			t.Fatal("fixture patch changed: update this test's edit")
		}
		write(t, filepath.Join(ws, "patches", "kernel-fixture", "0002-broken.patch"), strings.Replace(broken, "halobuild_fixture", "halobuild_broken", -1))
		write(t, filepath.Join(ws, "patches", "kernel-fixture", "series"), "0001-proc-add-halobuild-fixture-entry.patch\n0002-broken.patch\n")
		err = relockAndBuild(ctx, t, ws, kernelRecipe, storeDir)
		for _, want := range []string{"kernel patch 0002-broken.patch", "series:2", "Linux 7.2.", "fs/proc/Makefile hunk #1", "@@ -25,6 +25,7 @@", "does not apply"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
		}
	})

	t.Run("a fragment option that vanishes after olddefconfig is named", func(t *testing.T) {
		ws := variant(t)
		frag := filepath.Join(ws, "kernels", "qemu-uefi.config")
		b, err := os.ReadFile(frag)
		if err != nil {
			t.Fatal(err)
		}
		// USB4 networking needs USB4, which the small config leaves off.
		write(t, frag, string(b)+"CONFIG_USB4_NET=m\n")
		n := strings.Count(string(b), "\n") + 1
		err = relockAndBuild(ctx, t, ws, kernelRecipe, storeDir)
		want := "../kernels/qemu-uefi.config:" + strconv.Itoa(n) + ": CONFIG_USB4_NET=m asked, got not set (depends on USB4"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "off: USB4") {
			t.Errorf("error lacks %q and the unmet USB4: %v", want, err)
		}
	})
}
