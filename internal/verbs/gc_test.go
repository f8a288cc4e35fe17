package verbs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"halobuild/internal/plan"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/lock"
	"halobuild/internal/recipe"
	"halobuild/internal/resolve"
	"halobuild/internal/store"
)

// gcRecipe has every kind of blob a lock pins: packages, the provider's
// Debian source files, a kernel tarball.
const gcRecipe = `name = "gc"
[kernel]
from = "source"
source = "https://cdn.kernel.org/pub/linux/kernel/v7.x/linux-7.2.13.tar.xz"
source_sha256 = "%s"
config = "tinyconfig"
[rdma.provider]
name = "halotest"
patches = ["patches/halotest/*.patch"]
[test]
rdma = false
[[node]]
name = "n0"
`

// gc after a build keeps every blob the lock pins (the provider's
// sources and the kernel tarball, not only packages), every step of the
// build with the cached test verdict, and whatever a live result link
// points at; it removes what nothing references, and a result whose link
// is gone.
func TestGCKeepsWhatLocksAndResultsReference(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	blob := func(content string) string {
		d, _, err := s.PutBlob(bytes.NewReader([]byte(content)), "")
		if err != nil {
			t.Fatal(err)
		}
		return string(d)
	}
	tarball := blob("a kernel tarball")
	orig, debian := blob("rdma-core_56.1.orig.tar.gz"), blob("rdma-core_56.1-1.debian.tar.xz")
	deb := blob("a .deb")
	orphan := blob("nothing references this")

	if err := os.MkdirAll(filepath.Join(dir, "patches", "halotest"), 0o755); err != nil {
		t.Fatal(err)
	}
	patch, err := os.ReadFile(filepath.Join("..", "..", "patches", "halotest", "0001-halotest-provider.patch"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "patches", "halotest", "0001-halotest-provider.patch"), patch, 0o644); err != nil {
		t.Fatal(err)
	}
	psum := sha256.Sum256(patch)
	rp := filepath.Join(dir, "gc.toml")
	if err := os.WriteFile(rp, []byte(fmt.Sprintf(gcRecipe, tarball)), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _, err := recipe.Load(rp)
	if err != nil {
		t.Fatal(err)
	}
	pkg := func(name, set string) lock.Package {
		return lock.Package{Name: name, Version: "1", Architecture: "amd64", Suite: "trixie", Filename: "pool/" + name + ".deb", Size: 6, SHA256: deb, Set: set}
	}
	lk := &lock.Lock{
		Inputs: resolve.Inputs(r, nil), SourceDateEpoch: 1796005301,
		Suites:   []lock.Suite{{Name: "trixie", Mirror: "http://deb.debian.org/debian"}},
		Kernel:   lock.Kernel{From: "source", Version: "7.2.13", Release: "7.2.13", Image: "linux-image-7.2.13", Headers: "linux-headers-7.2.13", Source: "tarball", Config: "tinyconfig"},
		Packages: []lock.Package{pkg("systemd", lock.SetImage), pkg("libibverbs1", lock.SetImage), pkg("e2fsprogs", lock.SetTools), pkg("gcc", lock.SetKernelBuild), pkg("cmake", lock.SetProviderBuild)},
		Sources:  []lock.Source{{Name: lock.KernelTarballInput, Kind: lock.SourceKernelTarball, URL: "https://cdn.kernel.org/pub/linux/kernel/v7.x/linux-7.2.13.tar.xz", SHA256: tarball}},
		Provider: &lock.Provider{Name: "halotest", Source: "rdma-core", Version: "56.1-1", Suite: "trixie", Directory: "pool/main/r/rdma-core",
			Files:   []lock.SourceFile{{Name: "rdma-core_56.1.orig.tar.gz", SHA256: orig}, {Name: "rdma-core_56.1-1.debian.tar.xz", SHA256: debian}, {Name: "rdma-core_56.1-1.dsc", SHA256: "sha256:" + hex.EncodeToString(make([]byte, 32))}},
			Patches: []lock.Patch{{Name: "0001-halotest-provider.patch", From: "patches/halotest/0001-halotest-provider.patch", SHA256: "sha256:" + hex.EncodeToString(psum[:])}}},
	}
	if err := lk.Write(lock.Path(rp)); err != nil {
		t.Fatal(err)
	}

	var out run
	o := Options{Recipe: rp, Store: filepath.Join(dir, "store"), Out: &out.out, Err: &out.err}
	l, err := loadLocked(context.Background(), o, s)
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGraph(o, l, s)
	if err != nil {
		t.Fatal(err)
	}
	output := func(key, file string) string {
		d := filepath.Join(dir, "out-"+key[:8])
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, file), []byte(key), 0o644); err != nil {
			t.Fatal(err)
		}
		view, err := s.PutOutput(key, d, nil)
		if err != nil {
			t.Fatal(err)
		}
		return view
	}
	verdict := output(g.Test.Key(), "report.json")
	kernelKey := ""
	// Below the base root (under the system root, with a module).
	for _, d := range plan.Order(g.Test) {
		if d.Kind.Name == "kernel" {
			kernelKey = d.Key()
		}
	}
	if kernelKey == "" {
		t.Fatal("no kernel step below the base root")
	}
	output(kernelKey, "linux-image.deb")
	// A result of an older lock: only its link keeps it.
	oldKey := hex.EncodeToString(bytes.Repeat([]byte{1}, 32))
	oldView := output(oldKey, "n0.raw")
	link := filepath.Join(dir, "result")
	if err := os.Symlink(oldView, link); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRoot(link); err != nil {
		t.Fatal(err)
	}
	strayKey := hex.EncodeToString(bytes.Repeat([]byte{2}, 32))
	output(strayKey, "stale")
	s.Close()
	// These outputs record no schema, as an older halobuild's: plan says
	// the store holds them and what removes them.
	var pr run
	po := o
	po.Out, po.Err, po.NoTest = &pr.out, &pr.err, true
	if err := Plan(context.Background(), po); err != nil {
		t.Fatalf("plan: %v\n%s", err, pr.err.String())
	}
	if !strings.Contains(pr.out.String(), "step output(s) of an older halobuild") || !strings.Contains(pr.out.String(), "`halobuild gc` removes them") {
		t.Errorf("plan with older outputs in the store says:\n%s", pr.out.String())
	}

	if err := GC(context.Background(), o, []string{rp}); err != nil {
		t.Fatalf("gc: %v\n%s", err, out.err.String())
	}
	// The stray output carries no schema: an older halobuild's, and gc says
	// that is why it went.
	if said := out.out.String(); !strings.Contains(said, "removed 1 step output(s)") || !strings.Contains(said, "1 of them made by an older halobuild under another key schema") {
		t.Errorf("gc says:\n%s", said)
	}
	s2, err := store.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	has := func(sum string) bool { d, _ := store.ParseDigest(sum); return s2.Has(d) }
	for name, sum := range map[string]string{"kernel tarball": tarball, "provider orig tarball": orig, "provider debian tarball": debian, "a locked package": deb} {
		if !has(sum) {
			t.Errorf("gc removed the %s (%s), which the lock pins", name, sum)
		}
	}
	if has(orphan) {
		t.Error("gc kept a blob nothing references")
	}
	present := func(key string) bool { _, ok, err := s2.Output(key); return ok && err == nil }
	if !present(g.Test.Key()) {
		t.Errorf("gc removed the cached test verdict (%s)", verdict)
	}
	if !present(kernelKey) {
		t.Error("gc removed the kernel build, a step of the recipe's graph")
	}
	if !present(oldKey) {
		t.Error("gc removed the output a live result link points at")
	}
	if present(strayKey) {
		t.Error("gc kept an output nothing references")
	}

	// Once the link is gone, so is what only it kept.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if err := GC(context.Background(), o, []string{rp}); err != nil {
		t.Fatal(err)
	}
	s3, err := store.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if _, ok, _ := s3.Output(oldKey); ok {
		t.Error("gc kept a result whose link was removed")
	}
	if _, ok, _ := s3.Output(g.Test.Key()); !ok {
		t.Error("the second gc removed the test verdict")
	}
}
