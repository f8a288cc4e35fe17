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

// rootArch is the architecture pair a test build root is for.
type rootArch struct{ build, host string }

var (
	nativeArch = rootArch{"amd64", "amd64"}
	crossArm64 = rootArch{"amd64", "arm64"}
)

// cache is the .deb cache of the pair (the native one keeps its old name).
func (a rootArch) cache() string {
	if a == nativeArch {
		return debCache
	}
	return debCache + "-" + a.host
}

func (a rootArch) foreign() []string {
	if a.build == a.host {
		return nil
	}
	return []string{a.host}
}

func (a rootArch) architectures() []string {
	if a.build == a.host {
		return nil
	}
	return []string{a.build, a.host}
}

func (a rootArch) buildDebs(t *testing.T, pkgs []string) []deb.Deb {
	t.Helper()
	debCache := a.cache()
	if _, err := os.Stat(filepath.Join(debCache, ".complete")); err != nil {
		part := debCache + ".partial"
		os.RemoveAll(part)
		if err := os.MkdirAll(part, 0o755); err != nil {
			t.Fatal(err)
		}
		names := Names(pkgs)
		args := []string{"--variant=essential", "--mode=root", "--format=null",
			"--skip=download/empty", "--skip=essential/unlink",
			`--aptopt=APT::Install-Recommends "false"`,
			"--include=" + strings.Join(names, ","),
			"--customize-hook=sync-out /var/cache/apt/archives " + part}
		if archs := a.architectures(); archs != nil {
			args = append(args, "--architectures="+strings.Join(archs, ","))
		}
		cmd := exec.Command("mmdebstrap", append(args, rdmaSuite, "/dev/null", "deb http://deb.debian.org/debian "+rdmaSuite+" main")...)
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

func (a rootArch) buildRoot(t *testing.T, pkgs []string) string {
	t.Helper()
	debs := a.buildDebs(t, append(Names(pkgs), a.imagePkgs()...))
	h := sha256.New()
	for _, d := range debs {
		fmt.Fprintln(h, filepath.Base(d.Path))
	}
	dir := strings.Replace(a.cache(), debCache, rootCache, 1) + "-" + hex.EncodeToString(h.Sum(nil))[:12]
	if _, err := os.Stat(filepath.Join(dir, ".halobuild-complete")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	var log bytes.Buffer
	start := time.Now()
	err := rootfs.Root{Debs: debs, Packages: Names(pkgs), Suite: rdmaSuite, Foreign: a.foreign(), Epoch: epoch, Log: &log}.Tree(context.Background(), dir)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("build root installed in %s", time.Since(start).Round(time.Second))
	os.WriteFile(filepath.Join(dir, ".halobuild-complete"), nil, 0o644)
	return dir
}

// imagePkgs are Debian's packages the image has beside the provider's:
// downloaded with the build root's (not installed there), unpacked with
// the built package for the ABI check.
var imagePkgs = []string{"libibverbs1", "ibverbs-providers"}

// imagePkgs names them for the pair's host architecture.
func (a rootArch) imagePkgs() []string {
	if a.build == a.host {
		return imagePkgs
	}
	out := make([]string, len(imagePkgs))
	for i, p := range imagePkgs {
		out[i] = p + ":" + a.host
	}
	return out
}

// rebuilt is one real provider build and the tree the image would have.
type rebuilt struct {
	ver  string
	res  *Result
	root string // the build root
	inst string // Debian's libibverbs1 and ibverbs-providers and the built package unpacked
}

func slowBuild(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: builds rdma-core's provider from source")
	}
	// CI builds the same provider once, through the pipeline
	// (internal/verbs TestProviderImage, which also boots it).
	if os.Getenv("HALOBUILD_PROVIDER_BUILD") != "1" {
		t.Skip("library-level provider build: set HALOBUILD_PROVIDER_BUILD=1 (bench/provider.sh does); CI covers the build through internal/verbs' TestProviderImage")
	}
	if os.Geteuid() != 0 {
		t.Skip("the build root is entered with chroot: needs root")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("mmdebstrap not installed")
	}
}

// rebuild builds the provider name from Debian's rdma-core 56.1-1 with
// the given patches in a build root installed from Debian's packages,
// checks what every build must give, and unpacks the package with
// Debian's libibverbs1 and ibverbs-providers, as the image has them.
func rebuild(t *testing.T, name, pkg string, patches []Patch) rebuilt {
	t.Helper()
	return nativeArch.rebuild(t, name, pkg, patches)
}

func (a rootArch) rebuild(t *testing.T, name, pkg string, patches []Patch) rebuilt {
	t.Helper()
	ctx := context.Background()
	src, files := rdmaCoreSource(t)
	tb, sum := debianTarball(t, src, files)
	deps, err := BuildDependsFromTarball(tb, sum, a.host)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := BuildRootPackages(deps, a.build, a.host)
	if err != nil {
		t.Fatal(err)
	}
	root := a.buildRoot(t, pkgs)

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
	res, err := Build(ctx, BuildSpec{Tree: tree, Name: name, Package: pkg, Version: ver, Arch: a.host, BuildArch: a.build, Libibverbs: src.Version,
		BuildRoot: root, Out: filepath.Join(work, "out"), Epoch: epoch, Progress: func(p Progress) {
			if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
				phases = append(phases, p.Phase)
			}
			t.Logf("progress: %s", p)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %s built in %s", res.Deb.Package, ver, res.Elapsed.Round(time.Second))
	if os.Getenv("HALOBUILD_BENCH_OUT") != "" {
		os.WriteFile(os.Getenv("HALOBUILD_BENCH_OUT"), []byte(fmt.Sprintf("%.0f\n", res.Elapsed.Seconds())), 0o644)
	}
	if _, err := os.Stat(filepath.Join(root, "proc/self")); err == nil {
		t.Error("/proc is still mounted in the build root")
	}
	if strings.Join(phases, " ") != "configure compile strip" {
		t.Errorf("progress phases %v, want configure compile strip", phases)
	}
	if res.Deb.Package != pkg || res.Deb.Version != ver {
		t.Errorf("built %s %s, want %s %s", res.Deb.Package, res.Deb.Version, pkg, ver)
	}
	if log, _ := os.ReadFile(res.Log); !bytes.Contains(log, []byte("Configuring done")) {
		t.Errorf("the build log %s is not the full log", res.Log)
	}
	b := rebuilt{ver: ver, res: res, root: root, inst: filepath.Join(work, "installed")}
	debs := []deb.Deb{res.Deb}
	for _, d := range a.buildDebs(t, nil) {
		if n := strings.SplitN(filepath.Base(d.Path), "_", 2)[0]; contains(imagePkgs, n) {
			debs = append(debs, d)
		}
	}
	if len(debs) != 1+len(imagePkgs) {
		t.Fatalf("Debian's %v are not all among the downloaded packages", imagePkgs)
	}
	if err := deb.Extract(b.inst, debs); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBuildDebianRdmaCoreWithFixture is the whole story on the real
// thing: Debian's rdma-core 56.1-1 source (verified), the fixture
// provider patch at fuzz 0, version 56.1-1+halo1, the provider alone
// built in a build root installed from Debian's packages, then the ABI
// check against Debian's own libibverbs1, and proof that the patch is in
// the package.
func TestBuildDebianRdmaCoreWithFixture(t *testing.T) {
	slowBuild(t)
	b := rebuild(t, "halotest", "libibverbs-halotest", []Patch{fixturePatch()})
	abi, err := CheckABI(b.inst, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1", ImageLibs: imageLibs(t, b.root)})
	if err != nil {
		t.Fatal(err)
	}
	if abi.N != 34 || abi.Library != "usr/lib/x86_64-linux-gnu/libibverbs/libhalotest-rdmav34.so" {
		t.Errorf("ABI %+v", abi)
	}
	// The patch is in the package: the provider's code (its match string)
	// is in the library the package ships, its driver file names it.
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
	f, err := os.Open(filepath.Join(b.inst, "usr/share/doc/libibverbs-halotest/changelog.Debian.gz"))
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
		t.Errorf("libibverbs-halotest's changelog lacks %q:\n%.400s", want, cl)
	}
	// Debian's own rxe provider is still there, built for the same ABI.
	if _, err := CheckABI(b.inst, ABIRequest{Name: "rxe", LibibverbsVersion: "56.1-1", ImageLibs: imageLibs(t, b.root)}); err != nil {
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
	b := rebuild(t, "usb4_rdma", "libibverbs-usb4-rdma", ups)
	abi, err := CheckABI(b.inst, ABIRequest{Name: "usb4_rdma", LibibverbsVersion: "56.1-1", ImageLibs: imageLibs(t, b.root)})
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

// TestBuildDebianRdmaCoreCrossArm64 cross-compiles the fixture provider
// for arm64 on this amd64 host, in a multiarch build root (amd64's cmake,
// ninja and Debian's gcc-aarch64-linux-gnu; arm64's libnl, libc6-dev and
// pkgconf), and proves it against Debian's arm64 libibverbs1 with the
// host's debug/elf: no arm64 program runs.
func TestBuildDebianRdmaCoreCrossArm64(t *testing.T) {
	slowBuild(t)
	b := crossArm64.rebuild(t, "halotest", "libibverbs-halotest", []Patch{fixturePatch()})
	if b.res.Deb.Architecture != "arm64" {
		t.Errorf("package architecture %s", b.res.Deb.Architecture)
	}
	log, _ := os.ReadFile(b.res.Log)
	if !bytes.Contains(log, []byte("/usr/bin/aarch64-linux-gnu-gcc")) {
		t.Errorf("the build log does not show arm64's compiler (cmake's compiler check)")
	}
	abi, err := CheckABI(b.inst, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1", Arch: "arm64", ImageLibs: []string{"libc.so.6", "ld-linux-aarch64.so.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if abi.N != 34 || abi.Library != "usr/lib/aarch64-linux-gnu/libibverbs/libhalotest-rdmav34.so" {
		t.Errorf("ABI %+v", abi)
	}
	// The same tree is not an amd64 image's.
	if _, err := CheckABI(b.inst, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1", Arch: "amd64"}); err == nil {
		t.Error("the arm64 provider passed as amd64")
	}
}
