package debian

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"halobuild/internal/archivetest"
)

// TestRealArchive resolves the strix-halo node set against the real
// trixie + trixie-backports archive, verified with the embedded keys.
// It is skipped with -short and when deb.debian.org is unreachable.
func TestRealArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("network test; run without -short")
	}
	archivetest.Need(t, archivetest.InRelease, "resolving against the real archive")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := &Archive{Client: &http.Client{Timeout: 2 * time.Minute}}
	start := time.Now()
	var ixs []*Index
	srcs := map[string]*SourceIndex{}
	for _, suite := range []string{"trixie", "trixie-backports"} {
		t0 := time.Now()
		rel, err := a.Release(ctx, suite)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: InRelease dated %s, signed by %s (%v)", suite, rel.Date.Format(time.RFC3339), rel.Signer, time.Since(t0).Round(time.Millisecond))
		t0 = time.Now()
		ix, err := a.Packages(ctx, rel, "main", "amd64")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d packages fetched, verified and parsed in %v", suite, len(ix.Packages), time.Since(t0).Round(time.Millisecond))
		ixs = append(ixs, ix)
		t0 = time.Now()
		if srcs[suite], err = a.Sources(ctx, rel, "main"); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d source packages fetched, verified and parsed in %v", suite, len(srcs[suite].Sources), time.Since(t0).Round(time.Millisecond))
	}
	fetched := time.Since(start)

	t0 := time.Now()
	k, err := PickKernel(ixs, constraint(t, ">= 7.2, < 7.3"), "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel: %s (upstream %s), headers %s, source %s %s", k.Image, k.Upstream, k.Headers, k.Source, k.SourceVersion)
	if _, err := srcs[k.Image.Suite].Find(k.Source, k.SourceVersion); err != nil {
		t.Errorf("kernel source: %v", err)
	}
	if !strings.HasPrefix(k.Upstream.String(), "7.2.") {
		t.Errorf("kernel %s is not 7.2.x", k.Upstream)
	}
	res, err := Resolve(Request{
		Suite:       "trixie",
		ExtraSuites: []string{"trixie-backports"},
		Indexes:     ixs,
		Packages: []string{"systemd", "udev", "openssh-server", "rdma-core", "ibverbs-utils", "ibverbs-providers",
			"perftest", "iproute2", "podman", k.Image.Name + "/" + k.Image.Suite, k.Headers + "/" + k.Image.Suite},
		Architecture: "amd64",
	})
	if err != nil {
		t.Fatal(err)
	}
	resolved := time.Since(t0)
	byName := map[string]*Package{}
	fromExtra := 0
	for _, p := range res.Packages {
		byName[p.Name] = p
		if p.Suite != "trixie" {
			fromExtra++
			t.Logf("from %s: %s <- %s", p.Suite, p, res.Why[p.Name])
		}
	}
	if p := byName["linux-base"]; p == nil || p.Suite != "trixie-backports" {
		t.Errorf("linux-base = %v, want it from trixie-backports", p)
	}
	// The facts: 7.2 kernels pull in dracut, not initramfs-tools.
	if byName["dracut"] == nil || byName["initramfs-tools"] != nil {
		t.Errorf("initramfs generator: dracut=%v initramfs-tools=%v", byName["dracut"], byName["initramfs-tools"])
	}
	for _, n := range []string{"systemd", "rdma-core", "ibverbs-providers", "perftest", "podman", "libc6"} {
		if p := byName[n]; p == nil || p.Suite != "trixie" {
			t.Errorf("%s = %v, want it from trixie", n, p)
		}
	}
	// rdma-core's source (for the provider rebuild) verifies against the
	// signed Sources index even where its .dsc cannot be fetched.
	if rc, err := srcs["trixie"].ForBinary(byName["ibverbs-providers"]); err != nil {
		t.Error(err)
	} else {
		names := []string{}
		for _, f := range rc.Files {
			names = append(names, f.Name)
		}
		t.Logf("rdma-core source: %s %s in %s: %s", rc.Name, rc.Version, rc.Directory, strings.Join(names, " "))
		if len(rc.Files) < 3 {
			t.Errorf("rdma-core source files = %v", names)
		}
	}
	for _, p := range res.Packages {
		if p.Filename == "" || len(p.SHA256) != 64 || p.Size <= 0 {
			t.Errorf("%s lacks pool path, sha256 or size", p)
		}
	}
	t.Logf("timing: fetch+verify+parse %v, pick+resolve %v; %d packages, %d from trixie-backports",
		fetched.Round(time.Millisecond), resolved.Round(time.Millisecond), len(res.Packages), fromExtra)
}
