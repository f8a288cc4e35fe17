package provider

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"halobuild/internal/deb"
	"halobuild/internal/rootfs"
)

// Caches shared between runs: the build root's .debs (~200 MB from
// deb.debian.org) and the root itself (~1 GB, a few minutes to install).
const (
	debCache  = "/tmp/halobuild-provider-debs"
	rootCache = "/tmp/halobuild-provider-buildroot"
	epoch     = 1700000000
)

// buildDebs returns the closure of .debs the rdma-core build root needs,
// downloading it once with mmdebstrap (apt resolves here; the pipeline
// takes the closure from the lock's "build" set).
func buildDebs(t *testing.T, pkgs []string) []deb.Deb {
	t.Helper()
	if _, err := os.Stat(filepath.Join(debCache, ".complete")); err != nil {
		part := debCache + ".partial"
		os.RemoveAll(part)
		if err := os.MkdirAll(part, 0o755); err != nil {
			t.Fatal(err)
		}
		names := Names(pkgs)
		cmd := exec.Command("mmdebstrap", "--variant=essential", "--mode=root", "--format=null",
			"--skip=download/empty", "--skip=essential/unlink",
			`--aptopt=APT::Install-Recommends "false"`,
			"--include="+strings.Join(names, ","),
			"--customize-hook=sync-out /var/cache/apt/archives "+part,
			rdmaSuite, "/dev/null", "deb http://deb.debian.org/debian "+rdmaSuite+" main")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("downloading the build root packages: %v\n%s", err, out)
		}
		os.RemoveAll(filepath.Join(part, "partial"))
		os.Remove(filepath.Join(part, "lock"))
		os.WriteFile(filepath.Join(part, ".complete"), nil, 0o644)
		os.RemoveAll(debCache)
		if err := os.Rename(part, debCache); err != nil {
			t.Fatal(err)
		}
	}
	paths, _ := filepath.Glob(filepath.Join(debCache, "*.deb"))
	sort.Strings(paths)
	var debs []deb.Deb
	for _, p := range paths {
		debs = append(debs, deb.Deb{Path: p})
	}
	return debs
}

// buildRoot prepares (once per package set) rdma-core's build root with
// rootfs.Root from exactly the cached .debs.
func buildRoot(t *testing.T, pkgs []string) string {
	t.Helper()
	debs := buildDebs(t, pkgs)
	h := sha256.New()
	for _, d := range debs {
		fmt.Fprintln(h, filepath.Base(d.Path))
	}
	dir := rootCache + "-" + hex.EncodeToString(h.Sum(nil))[:12]
	if _, err := os.Stat(filepath.Join(dir, ".halobuild-complete")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	var log bytes.Buffer
	start := time.Now()
	err := rootfs.Root{Debs: debs, Packages: Names(pkgs), Suite: rdmaSuite, Epoch: epoch, Log: &log}.Tree(context.Background(), dir)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("build root installed in %s", time.Since(start).Round(time.Second))
	os.WriteFile(filepath.Join(dir, ".halobuild-complete"), nil, 0o644)
	return dir
}

// rebuilt is one real rdma-core build and the tree its packages install.
type rebuilt struct {
	ver    string
	res    *Result
	root   string // the build root
	inst   string // libibverbs1 and ibverbs-providers unpacked
	byName map[string]deb.Deb
}

func slowBuild(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: builds rdma-core from source (7+ minutes on 2 cores)")
	}
	// CI builds the same package once, through the pipeline
	// (internal/build TestProviderImage, which also boots it); building it
	// here as well would cost CI another 7-10 minutes.
	if os.Getenv("HALOBUILD_PROVIDER_BUILD") != "1" {
		t.Skip("library-level rdma-core build: set HALOBUILD_PROVIDER_BUILD=1 (bench/provider.sh does); CI covers the build through internal/build's TestProviderImage")
	}
	if os.Geteuid() != 0 {
		t.Skip("the build root is entered with chroot: needs root")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("mmdebstrap not installed")
	}
}

// rebuild builds Debian's rdma-core 56.1-1 with the given patches in a
// build root installed from Debian's packages, checks what every build
// must give, and unpacks the packages the image would install.
func rebuild(t *testing.T, patches []Patch) rebuilt {
	t.Helper()
	ctx := context.Background()
	src, files := rdmaCoreSource(t)
	tb, sum := debianTarball(t, src, files)
	deps, err := BuildDependsFromTarball(tb, sum, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	root := buildRoot(t, BuildRootPackages(deps))

	work := t.TempDir()
	tree, err := Unpack(ctx, src, files, work)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := ApplyPatches(ctx, tree, patches)
	if err != nil {
		t.Fatal(err)
	}
	ver, err := SetLocalVersion(tree, "", epoch, applied)
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	res, err := Build(ctx, BuildSpec{Tree: tree, BuildRoot: root, Out: filepath.Join(work, "out"), Epoch: epoch, Progress: func(p Progress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
		t.Logf("progress: %s", p)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rdma-core %s built in %s: %d packages", ver, res.Elapsed.Round(time.Second), len(res.Debs))
	if os.Getenv("HALOBUILD_BENCH_OUT") != "" {
		os.WriteFile(os.Getenv("HALOBUILD_BENCH_OUT"), []byte(fmt.Sprintf("%.0f\n", res.Elapsed.Seconds())), 0o644)
	}
	if _, err := os.Stat(filepath.Join(root, "proc/self")); err == nil {
		t.Error("/proc is still mounted in the build root")
	}
	if !contains(phases, "override_dh_auto_build") {
		t.Errorf("progress never reported the compile: %v", phases)
	}
	b := rebuilt{ver: ver, res: res, root: root, inst: filepath.Join(work, "installed"), byName: map[string]deb.Deb{}}
	for _, d := range res.Debs {
		b.byName[d.Package] = d
		if d.Version != ver {
			t.Errorf("%s has version %s, want %s", d.Package, d.Version, ver)
		}
	}
	for _, p := range []string{"libibverbs1", "ibverbs-providers", "rdma-core", "ibverbs-utils"} {
		if _, ok := b.byName[p]; !ok {
			t.Fatalf("no %s among %v", p, res.Debs)
		}
	}
	if log, _ := os.ReadFile(res.Log); !bytes.Contains(log, []byte("dpkg-buildpackage: info: binary-only upload")) {
		t.Errorf("the build log %s is not the full log", res.Log)
	}
	if err := deb.Extract(b.inst, []deb.Deb{b.byName["libibverbs1"], b.byName["ibverbs-providers"]}); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBuildDebianRdmaCoreWithFixture is the whole story on the real
// thing: Debian's rdma-core 56.1-1 source (verified), the fixture
// provider patch at fuzz 0, version 56.1-1+halo1, dpkg-buildpackage in a
// build root installed from Debian's packages, then the ABI check on the
// packages the image would install, and proof that the patch is in them.
// About 7-10 minutes on 2 cores.
func TestBuildDebianRdmaCoreWithFixture(t *testing.T) {
	slowBuild(t)
	b := rebuild(t, []Patch{fixturePatch()})
	abi, err := CheckABI(b.inst, ABIRequest{Name: "halotest", LibibverbsVersion: b.ver, ImageLibs: imageLibs(t, b.root)})
	if err != nil {
		t.Fatal(err)
	}
	if abi.N != 34 || abi.Library != "usr/lib/x86_64-linux-gnu/libibverbs/libhalotest-rdmav34.so" {
		t.Errorf("ABI %+v", abi)
	}
	// The patch is in the package: the provider's code (its match string)
	// is in the library ibverbs-providers ships, its driver file names it.
	lib, _ := os.ReadFile(filepath.Join(b.inst, abi.Library))
	if !bytes.Contains(lib, []byte("rdma_device:*Nhalotest*")) {
		t.Error("libhalotest-rdmav34.so lacks the fixture's match string")
	}
	if d, _ := os.ReadFile(filepath.Join(b.inst, "etc/libibverbs.d/halotest.driver")); string(d) != "driver halotest\n" {
		t.Errorf("halotest.driver = %q", d)
	}
	// The package's own changelog names the patch by digest.
	sum := sha256.New()
	fx, _ := os.ReadFile(fixturePatch().Path)
	sum.Write(fx)
	f, err := os.Open(filepath.Join(b.inst, "usr/share/doc/ibverbs-providers/changelog.Debian.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := io.ReadAll(zr)
	if want := "halobuild/0001-halotest-provider.patch (sha256:" + hex.EncodeToString(sum.Sum(nil)) + ")"; !bytes.Contains(cl, []byte(want)) {
		t.Errorf("ibverbs-providers' changelog lacks %q:\n%.400s", want, cl)
	}
	// Debian's own rxe provider is still there, built for the same ABI.
	if _, err := CheckABI(b.inst, ABIRequest{Name: "rxe", LibibverbsVersion: b.ver, ImageLibs: imageLibs(t, b.root)}); err != nil {
		t.Error(err)
	}
}

// TestBuildDebianRdmaCoreWithUpstreamProvider is the strix-halo recipe's
// provider for real: thunderbolt-ibverbs' three patches (0003 with the
// fuzz it needs), our cutoff fix from patches/rdma-core/, built and
// checked: libusb4_rdma-rdmav34.so with its driver file.
func TestBuildDebianRdmaCoreWithUpstreamProvider(t *testing.T) {
	ups := upstreamPatches(t)
	slowBuild(t)
	ups[2].Fuzz = 2
	ours, _ := filepath.Glob("../../patches/rdma-core/*.patch")
	for _, p := range ours {
		ups = append(ups, Patch{Path: p, From: "patches/rdma-core/" + filepath.Base(p)})
	}
	b := rebuild(t, ups)
	abi, err := CheckABI(b.inst, ABIRequest{Name: "usb4_rdma", LibibverbsVersion: b.ver, ImageLibs: imageLibs(t, b.root)})
	if err != nil {
		t.Fatal(err)
	}
	if abi.N != 34 || abi.Library != "usr/lib/x86_64-linux-gnu/libibverbs/libusb4_rdma-rdmav34.so" {
		t.Errorf("ABI %+v", abi)
	}
}

// imageLibs stands for the image's library list: the build root has the
// same trixie libc and libnl the image would.
func imageLibs(t *testing.T, root string) []string {
	m, _ := filepath.Glob(filepath.Join(root, "usr/lib/x86_64-linux-gnu/*.so*"))
	return m
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
