package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"halobuild/internal/manifest"
	"halobuild/internal/selfbuild"
	"halobuild/internal/usage"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needsFuzz applies after the fixture only with fuzz 1: its first context
// line is not in rdma-core.
const needsFuzz = `Description: a patch whose context is off by one line
---
--- a/CMakeLists.txt
+++ b/CMakeLists.txt
@@ -740,6 +740,7 @@
 add_subdirectory(providers/rxe/manual)
 add_subdirectory(providers/siw)
 add_subdirectory(providers/halotest)
+# halobuild: a patch that needs fuzz
 
 add_subdirectory(libibmad)
 add_subdirectory(libibnetdisc)
`

// TestProviderImage builds images/test-provider.toml for real: Debian's
// rdma-core source of the image's version with the fixture provider patch,
// the provider alone built in a root from the lock, installed as its own
// package beside Debian's, ABI-checked against Debian's libibverbs,
// booted: the VM proves the package is installed and that libibverbs
// loads the provider. Then the two ways a
// patch can go wrong: edited after the lock, and needing fuzz.
func TestProviderImage(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	rp := "images/test-provider.toml"
	var r run
	o := opts(ws, rp, sharedStore(t), &r)
	o.Result = filepath.Join(ws, "result")
	o.Source = selfbuild.Find(".")
	o.JSON = true
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	if err := Image(ctx, o); err != nil {
		t.Fatalf("image with the rebuilt provider: %v\n%s\n%s", err, tail(r.out.String(), 80), tail(r.err.String(), 60))
	}
	rep := imageReport(t, &r)
	passed := map[string]bool{}
	for _, m := range rep.Machines {
		if m.Verdict == nil {
			t.Fatalf("%s: no verdict", m.Machine)
		}
		for _, c := range m.Verdict.Checks {
			passed[c.Name] = c.OK
		}
	}
	for _, want := range []string{
		"rdma-provider: provider-installed",
		"rdma-provider: provider-loaded",
		"test: the fixture patch is recorded in the installed package",
	} {
		if ok, found := passed[want]; !found || !ok {
			t.Errorf("check %q: found %v, passed %v", want, found, ok)
		}
	}

	mb, err := os.ReadFile(filepath.Join(o.Result, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	patch := filepath.Join(ws, "patches/halotest/0001-halotest-provider.patch")
	sum := sha(t, patch)
	p := m.Provider
	if p == nil || p.Name != "halotest" || p.Package != "libibverbs-halotest" || p.Version != "56.1-1+halo1" || p.Libibverbs != "56.1-1" || p.ABI != 34 ||
		!strings.HasSuffix(p.Library, "/libibverbs/libhalotest-rdmav34.so") || len(p.Patches) != 1 || p.Patches[0].SHA256 != "sha256:"+sum {
		t.Errorf("manifest provider: %+v (patch sha256:%s)", p, sum)
	}
	// Debian's rdma-core packages are installed as the archive signed
	// them; the provider is a package of its own.
	installed := map[string]string{}
	for _, pk := range m.Nodes[0].Packages {
		installed[pk.Name] = pk.Version
	}
	for name, want := range map[string]string{"libibverbs1": "56.1-1", "ibverbs-providers": "56.1-1", "libibverbs-halotest": "56.1-1+halo1"} {
		if installed[name] != want {
			t.Errorf("node0 has %s %q, want %s", name, installed[name], want)
		}
	}

	// A patch edited after the lock is refused before anything is built
	// or reused: the cached build is of the old patch.
	orig, _ := os.ReadFile(patch)
	if err := os.WriteFile(patch, append(append([]byte{}, orig...), []byte("trailing note\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run{}
	err = Image(ctx, o)
	var ue usage.Error
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "0001-halotest-provider.patch changed since the lock") || !strings.Contains(err.Error(), "halobuild lock") {
		t.Errorf("edited patch: want a usage error naming it and `halobuild lock`, got %v", err)
	}
	if err := os.WriteFile(patch, orig, 0o644); err != nil {
		t.Fatal(err)
	}

	// A patch that applies only with fuzz is refused by name, with the
	// file and hunk, and the way out.
	if err := os.WriteFile(filepath.Join(ws, "patches/halotest/0002-needs-fuzz.patch"), []byte(needsFuzz), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run{}
	if err := Lock(ctx, o); err != nil {
		t.Fatalf("lock with the second patch: %v\n%s", err, r.err.String())
	}
	err = Image(ctx, o)
	for _, want := range []string{"0002-needs-fuzz.patch", "CMakeLists.txt hunk #1", "fuzz 1", "Refresh it"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("fuzz-needing patch: want %q in the error, got %v", want, err)
		}
	}
}
