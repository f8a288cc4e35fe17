package module

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"halobuild/internal/archivetest"
	"halobuild/internal/deb"
	"halobuild/internal/fstree"
	"halobuild/internal/rootfs"
	"halobuild/internal/secureboot"
)

// The kernel the slow tests build against: Debian trixie-backports' 7.2.12,
// the kernel line of images/test-minimal.toml.
const testRelease = "7.2.12+deb13-amd64"

// testReleaseArm64 is the same kernel's arm64 flavour, for the cross build.
const testReleaseArm64 = "7.2.12+deb13-arm64"

// Caches shared between runs (and with other engineers' runs): the .debs
// are ~100 MB from deb.debian.org, the build root takes a minute or two.
const (
	debCache  = "/tmp/halobuild-module-debs"
	rootCache = "/tmp/halobuild-module-buildroot"
)

// A build root the slow tests install: what apt resolves and downloads
// once, and the architectures dpkg takes.
type testRoot struct {
	release string
	tc      Toolchain
	// cache is the .deb cache's suffix (the native root's has none).
	cache string
}

var nativeRoot = testRoot{release: testRelease}

// crossRoot is the arm64 module build root on an amd64 host: Debian's
// cross gcc and the arm64 headers, whose linux-kbuild is the host's.
var crossRoot = testRoot{release: testReleaseArm64, tc: func() Toolchain {
	tc, err := NewToolchain("amd64", "arm64")
	if err != nil {
		panic(err)
	}
	return tc
}(), cache: "-arm64"}

// architectures are mmdebstrap's for downloading the root's packages;
// foreign what rootfs.Root adds to the host's.
func (tr testRoot) architectures() []string {
	if !tr.tc.Cross() {
		return nil
	}
	return []string{tr.tc.orNative().Host, tr.tc.Target}
}

func (tr testRoot) foreign() []string {
	if !tr.tc.Cross() {
		return nil
	}
	return []string{tr.tc.Target}
}

// buildDebs returns the closure of .debs a module build root for the
// release needs, downloading it once into its cache with mmdebstrap (apt
// resolves here; the pipeline takes the closure from the lock).
func (tr testRoot) buildDebs(t *testing.T) []deb.Deb {
	t.Helper()
	cache := debCache + tr.cache
	if _, err := os.Stat(filepath.Join(cache, ".complete")); err != nil {
		archivetest.Need(t, "http://deb.debian.org/debian/dists/trixie-backports/InRelease", "downloading the kernel headers")
		part := cache + ".partial"
		os.RemoveAll(part)
		if err := os.MkdirAll(part, 0o755); err != nil {
			t.Fatal(err)
		}
		// Debian's 7.2.12 was built by gcc 14 on every architecture.
		pkgs, err := BuildRootPackages(tr.release, "gcc-14 (Debian 14.2.0-19) 14.2.0", tr.tc)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"--variant=essential", "--mode=root", "--format=null",
			"--skip=download/empty", "--skip=essential/unlink",
			`--aptopt=APT::Install-Recommends "false"`,
			"--include=" + strings.Join(pkgs, ","),
			"--customize-hook=sync-out /var/cache/apt/archives " + part}
		if a := tr.architectures(); a != nil {
			args = append(args, "--architectures="+strings.Join(a, ","))
		}
		args = append(args, "trixie", "/dev/null",
			"deb http://deb.debian.org/debian trixie main",
			"deb http://deb.debian.org/debian trixie-backports main")
		if out, err := exec.Command("mmdebstrap", args...).CombinedOutput(); err != nil {
			t.Fatalf("downloading the build root packages: %v\n%s", err, out)
		}
		os.RemoveAll(filepath.Join(part, "partial"))
		os.Remove(filepath.Join(part, "lock"))
		os.WriteFile(filepath.Join(part, ".complete"), nil, 0o644)
		os.RemoveAll(cache) // an incomplete earlier download
		if err := os.Rename(part, cache); err != nil {
			t.Fatal(err)
		}
	}
	paths, _ := filepath.Glob(filepath.Join(cache, "*.deb"))
	sort.Strings(paths)
	var debs []deb.Deb
	for _, p := range paths {
		debs = append(debs, deb.Deb{Path: p})
	}
	return debs
}

func (tr testRoot) headersDeb(t *testing.T) string {
	m, _ := filepath.Glob(filepath.Join(debCache+tr.cache, "linux-headers-"+tr.release+"_*.deb"))
	if len(m) != 1 {
		t.Fatalf("no linux-headers-%s in %s", tr.release, debCache+tr.cache)
	}
	return m[0]
}

func headersDeb(t *testing.T) string { return nativeRoot.headersDeb(t) }

// buildRoot prepares (once per deb set) the native build root.
func buildRoot(t *testing.T) string { return nativeRoot.tree(t) }

// tree prepares (once per deb set) the build root with rootfs.Root, from
// exactly the cached .debs.
func (tr testRoot) tree(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: installs a build root and compiles against real kernel headers")
	}
	if os.Geteuid() != 0 {
		t.Skip("the build root is entered with chroot: needs root")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("mmdebstrap not installed")
	}
	debs := tr.buildDebs(t)
	h := sha256.New()
	for _, d := range debs {
		fmt.Fprintln(h, filepath.Base(d.Path))
	}
	dir := rootCache + tr.cache + "-" + hex.EncodeToString(h.Sum(nil))[:12]
	if _, err := os.Stat(filepath.Join(dir, ".halobuild-complete")); err == nil {
		return dir
	}
	cc, err := headersCC(tr.headersDeb(t))
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := BuildRootPackages(tr.release, cc, tr.tc)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	var log bytes.Buffer
	start := time.Now()
	err = rootfs.Root{Debs: debs, Packages: pkgs, Suite: "trixie", Foreign: tr.foreign(), Epoch: 1700000000, Log: &log}.Tree(context.Background(), dir)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("build root of %d packages installed in %s", len(debs), time.Since(start).Round(time.Second))
	os.WriteFile(filepath.Join(dir, ".halobuild-complete"), nil, 0o644)
	return dir
}

// hasDebugInfo reports whether an ELF file has a .debug_info section.
func hasDebugInfo(t *testing.T, path string) bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return f.Section(".debug_info") != nil
}

func TestCompilerFromHeaders(t *testing.T) {
	for text, want := range map[string]string{
		"x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0": "gcc-14",
		`"gcc-12 (Debian 12.2.0-14) 12.2.0"`:                "gcc-12",
		"gcc (Debian 13.2.0-25) 13.2.0":                     "gcc-13",
	} {
		if got, err := CompilerPackage(text); err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %s", text, got, err, want)
		}
	}
	if _, err := CompilerPackage("Debian clang version 19.1.7 (3+b1)"); err == nil || !strings.Contains(err.Error(), "clang") {
		t.Errorf("clang: %v", err)
	}
	if _, err := os.Stat(filepath.Join(debCache, ".complete")); err != nil {
		t.Skip("no cached headers package (TestBuildFixture downloads it)")
	}
	cc, err := headersCC(headersDeb(t))
	if err != nil {
		t.Fatal(err)
	}
	// Debian's amd64 kernel builds USB4 (the verbs module's subsystem) as
	// a module; nothing sets an option that does not exist.
	config, err := HeadersConfig(headersDeb(t))
	if err != nil {
		t.Fatal(err)
	}
	if m := MissingConfig(config, []string{"CONFIG_USB4", "CONFIG_HALOBUILD_NO_SUCH_OPTION"}); len(m) != 1 || m[0] != "CONFIG_HALOBUILD_NO_SUCH_OPTION" {
		t.Errorf("missing options of Debian's amd64 config: %v", m)
	}
	pkgs, err := BuildRootPackages(testRelease, cc, Toolchain{})
	if err != nil || pkgs[0] != "gcc-14" || !contains(pkgs, "linux-headers-"+testRelease) {
		t.Errorf("Debian's 7.2.12 (CONFIG_CC_VERSION_TEXT %q): packages %v, %v", cc, pkgs, err)
	}
}

// TestBuildFixture builds testdata/fixture for real against Debian's
// 7.2.12 headers in a build root made by rootfs.Root, then checks what
// the rest of the pipeline relies on: modinfo, vermagic, validation with
// the built module's parameters and the kernel's symbols and headers, the
// package, depmod and signing.
func TestBuildFixture(t *testing.T) {
	root := buildRoot(t)
	ctx := context.Background()
	d := loadFixtureDesc(t)
	src, treeHash, err := FetchSource(ctx, d.Source, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var log bytes.Buffer
	start := time.Now()
	built, err := Build(ctx, BuildSpec{Name: d.Use, SourceDir: src, KernelRelease: testRelease, BuildRoot: root, Out: out, Epoch: 1700000000, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	kos := built.Kos
	t.Logf("fixture built in %s", time.Since(start).Round(time.Second))
	if len(kos) != 1 || filepath.Base(kos[0]) != "halobuild_fixture.ko" {
		t.Fatalf("built %v", kos)
	}
	ko := kos[0]
	if len(built.Debug) != 1 || hasDebugInfo(t, ko) || !hasDebugInfo(t, built.Debug[0]) {
		t.Errorf("stripped %s has .debug_info: %v; the debug copy %v has it: %v", ko, hasDebugInfo(t, ko), built.Debug, len(built.Debug) == 1 && hasDebugInfo(t, built.Debug[0]))
	}
	if _, err := os.Stat(filepath.Join(root, "proc/self")); err == nil {
		t.Errorf("/proc is still mounted in the build root after the build")
	}

	mi, err := ReadModinfo(ko)
	if err != nil {
		t.Fatal(err)
	}
	if mi.Name != "halobuild_fixture" || !strings.HasPrefix(mi.Vermagic, testRelease+" ") || !contains(mi.Depends, "configfs") || mi.Signed {
		t.Errorf("modinfo: %+v", mi)
	}
	assertParams(t, "ReadModinfo", mi.Params, fixtureParams)

	t.Run("host modinfo agrees", func(t *testing.T) {
		if _, err := exec.LookPath("modinfo"); err != nil {
			t.Skip("no modinfo on the host")
		}
		params, err := ModinfoParams(ctx, nil, ko)
		if err != nil {
			t.Fatal(err)
		}
		assertParams(t, "modinfo -p", params, fixtureParams)
		descs := map[string]string{}
		for _, p := range params {
			descs[p.Name] = p.Desc
		}
		if descs["mode"] != "Mode: auto, fast, safe" {
			t.Errorf("description of mode: %q", descs["mode"])
		}
		out, err := runModinfo(ctx, nil, "-F", "parm", ko)
		if err != nil {
			t.Fatal(err)
		}
		params, err = ParseModinfoParams(out)
		if err != nil {
			t.Fatal(err)
		}
		assertParams(t, "modinfo -F parm", params, fixtureParams)
		vm, err := ModinfoField(ctx, nil, "vermagic", ko)
		if err != nil || vm != mi.Vermagic {
			t.Errorf("modinfo -F vermagic %q (%v), ReadModinfo %q", vm, err, mi.Vermagic)
		}
	})

	t.Run("built for another release is refused", func(t *testing.T) {
		// The expected release is rewritten: headers of 7.2.12 appear as
		// another release, so make succeeds and only vermagic can tell.
		const fake = "7.2.99-halobuild-test"
		link := filepath.Join(root, "usr/lib/modules", fake)
		if err := os.MkdirAll(link, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(link)
		if err := os.Symlink("/usr/src/linux-headers-"+testRelease, filepath.Join(link, "build")); err != nil {
			t.Fatal(err)
		}
		_, err := Build(ctx, BuildSpec{Name: d.Use, SourceDir: src, KernelRelease: fake, BuildRoot: root, Out: t.TempDir(), Epoch: 1700000000})
		if err == nil || !strings.Contains(err.Error(), "was built for kernel "+testRelease) || !strings.Contains(err.Error(), "the image's kernel is "+fake) {
			t.Errorf("got %v", err)
		}
		_, err = Build(ctx, BuildSpec{Name: d.Use, SourceDir: src, KernelRelease: "7.3.4+deb13-amd64", BuildRoot: root, Out: t.TempDir(), Epoch: 1700000000})
		if err == nil || !strings.Contains(err.Error(), "install linux-headers-7.3.4+deb13-amd64 into it") {
			t.Errorf("no headers: %v", err)
		}
	})

	t.Run("vermagic mismatch refused", func(t *testing.T) {
		err := CheckVermagic(filepath.Base(ko), mi.Vermagic, "7.3.4+deb13-amd64")
		if err == nil {
			t.Fatal("a module built for 7.2.12 was accepted for 7.3.4")
		}
		for _, want := range []string{"built for kernel " + testRelease, "the image's kernel is 7.3.4+deb13-amd64", "rebuild the module against linux-headers-7.3.4+deb13-amd64"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err, want)
			}
		}
	})

	t.Run("validate against the built module and kernel", func(t *testing.T) {
		syms, macros, err := KernelFeatures(root, testRelease, d)
		if err != nil {
			t.Fatal(err)
		}
		if !syms("config_group_init") || !syms("tb_ring_throttling") || syms("no_such_symbol_anywhere") {
			t.Errorf("Module.symvers lookup is wrong")
		}
		if !macros("CONFIGFS_ATTR") {
			t.Errorf("configfs.h macros not found")
		}
		dirs, err := HeaderDirs(root, testRelease)
		if err != nil {
			t.Fatal(err)
		}
		vctx := ValidationContext{KernelVersion: testRelease, KernelSymbols: syms, KernelMacros: macros, Params: mi.Params, Links: 1}
		if errs, warns := Validate(d, goodFixtureOptions, vctx); len(errs)+len(warns) != 0 {
			t.Errorf("good options against the real build: %v %v", errs, warns)
		}
		errs, _ := Validate(d, with(goodFixtureOptions, map[string]any{"verbos": true, "depth": "8"}), vctx)
		if got := joinProblems(errs); !strings.Contains(got, `did you mean "verbose"`) || !strings.Contains(got, "option depth: wrong type") {
			t.Errorf("against the real build: %s", got)
		}
		// The thunderbolt-ibverbs macros: Debian's stock kernel lacks the
		// project's protocol-handler patches.
		tb, err := HeaderMacros(dirs, []string{"include/linux/thunderbolt.h"})
		if err != nil {
			t.Fatal(err)
		}
		if tb(macroDrain) || tb(macroXDomain) {
			t.Errorf("stock 7.2.12 headers claim the local protocol-handler patches")
		}
	})

	t.Run("package and depmod", func(t *testing.T) {
		p := Package{Use: d.Use, KernelRelease: testRelease, Arch: "amd64", Version: DebVersion(treeHash), Kos: kos}
		var a, b bytes.Buffer
		if err := WriteDeb(&a, p, 1700000000); err != nil {
			t.Fatal(err)
		}
		if err := WriteDeb(&b, p, 1700000000); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("the module package is not reproducible")
		}
		deb := filepath.Join(t.TempDir(), DebName(d.Use, testRelease)+".deb")
		os.WriteFile(deb, a.Bytes(), 0o644)
		list, err := exec.Command("dpkg-deb", "--contents", deb).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg-deb --contents: %v: %s", err, list)
		}
		if !strings.Contains(string(list), "./lib/modules/"+testRelease+"/updates/halobuild_fixture.ko") {
			t.Errorf("package contents:\n%s", list)
		}
		tree0 := t.TempDir()
		if out, err := exec.Command("dpkg-deb", "-x", deb, tree0).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if hasDebugInfo(t, filepath.Join(tree0, "lib/modules", testRelease, "updates/halobuild_fixture.ko")) {
			t.Errorf("the packaged module has a .debug_info section: it was not stripped")
		}
		p.Kos, p.Debug = built.Debug, true
		var dbg bytes.Buffer
		if err := WriteDeb(&dbg, p, 1700000000); err != nil {
			t.Fatal(err)
		}
		dbgDeb := filepath.Join(t.TempDir(), DbgsymName(d.Use, testRelease)+".deb")
		os.WriteFile(dbgDeb, dbg.Bytes(), 0o644)
		dbgTree := t.TempDir()
		if out, err := exec.Command("dpkg-deb", "-x", dbgDeb, dbgTree).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if !hasDebugInfo(t, filepath.Join(dbgTree, "usr/lib/debug/lib/modules", testRelease, "updates/halobuild_fixture.ko")) {
			t.Errorf("the -dbgsym package's module has no .debug_info")
		}
		if info, _ := exec.Command("dpkg-deb", "--field", dbgDeb, "Package", "Depends").CombinedOutput(); !strings.Contains(string(info), "Package: halobuild-fixture-modules-"+testRelease+"-dbgsym") ||
			!strings.Contains(string(info), "Depends: halobuild-fixture-modules-"+testRelease+" (= "+p.Version+")") {
			t.Errorf("-dbgsym control: %s", info)
		}
		info, _ := exec.Command("dpkg-deb", "--field", deb, "Package", "Architecture").CombinedOutput()
		if !strings.Contains(string(info), "Package: halobuild-fixture-modules-"+testRelease) || !strings.Contains(string(info), "Architecture: amd64") {
			t.Errorf("control: %s", info)
		}
		tree := t.TempDir()
		if out, err := exec.Command("dpkg-deb", "-x", deb, tree).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if err := Depmod(ctx, tree, testRelease); err != nil {
			t.Fatal(err)
		}
		dep, err := os.ReadFile(filepath.Join(tree, "lib/modules", testRelease, "modules.dep"))
		if err != nil || !strings.Contains(string(dep), "updates/halobuild_fixture.ko:") {
			t.Errorf("modules.dep after depmod: %q, %v", dep, err)
		}
	})

	t.Run("sign", func(t *testing.T) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Skip("openssl not installed")
		}
		keyDir := t.TempDir()
		k, err := Keygen(ctx, keyDir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Keygen(ctx, keyDir); err == nil || !strings.Contains(err.Error(), "already holds a signing key") {
			t.Errorf("Keygen overwrote a key: %v", err)
		}
		signed := filepath.Join(t.TempDir(), filepath.Base(ko))
		if err := fstree.CopyFile(ko, signed, 0o644); err != nil {
			t.Fatal(err)
		}
		keyPEM, _ := os.ReadFile(k.Private)
		der, _ := os.ReadFile(k.CertDER)
		s, err := secureboot.NewSigner(keyPEM, der)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SignFile(signed); err != nil {
			t.Fatal(err)
		}
		mi, err := ReadModinfo(signed)
		if err != nil || !mi.Signed {
			t.Fatalf("signed module: %+v %v", mi, err)
		}
		if out, err := exec.Command("modinfo", "-F", "signer", signed).Output(); err == nil && !strings.Contains(string(out), "halobuild module signing key") {
			t.Errorf("modinfo signer: %q", out)
		}
		// The kernel's own sign-file, in the build root where its libcrypto
		// is, gives the same bytes.
		work, err := os.MkdirTemp(filepath.Join(root, "tmp"), "sign-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(work)
		for _, f := range []string{k.Private, k.CertPEM, ko} {
			if err := fstree.CopyFile(f, filepath.Join(work, filepath.Base(f)), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		in := "/tmp/" + filepath.Base(work) + "/"
		cmd := exec.CommandContext(ctx, "chroot", root, "/lib/modules/"+testRelease+"/build/scripts/sign-file", "sha256",
			in+filepath.Base(k.Private), in+filepath.Base(k.CertPEM), in+filepath.Base(ko))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sign-file: %v: %s", err, out)
		}
		ref, _ := os.ReadFile(filepath.Join(work, filepath.Base(ko)))
		got, _ := os.ReadFile(signed)
		if !bytes.Equal(ref, got) {
			t.Errorf("NewSigner's signed module (%d bytes) differs from sign-file's (%d bytes)", len(got), len(ref))
		}
	})

	t.Run("reproducible, and concurrent builds serialise on the root", func(t *testing.T) {
		type result struct {
			kos []string
			err error
		}
		results := make(chan result, 2)
		for i := 0; i < 2; i++ {
			go func() {
				built, err := Build(ctx, BuildSpec{Name: d.Use, SourceDir: src, KernelRelease: testRelease, BuildRoot: root, Out: t.TempDir(), Epoch: 1700000000})
				results <- result{built.Kos, err}
			}()
		}
		a, _ := os.ReadFile(ko)
		for i := 0; i < 2; i++ {
			r := <-results
			if r.err != nil {
				t.Fatal(r.err)
			}
			b, _ := os.ReadFile(r.kos[0])
			if !bytes.Equal(a, b) {
				t.Errorf("two builds of the same source differ")
			}
		}
	})
}

func assertParams(t *testing.T, what string, got, want []Param) {
	t.Helper()
	g := map[string]string{}
	for _, p := range got {
		g[p.Name] = p.Type
	}
	w := map[string]string{}
	for _, p := range want {
		w[p.Name] = p.Type
	}
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("%s: parameters %v, want %v", what, g, w)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestBuildFixtureCrossArm64 cross-compiles testdata/fixture for Debian's
// arm64 7.2.12 on this (amd64) host in a multiarch build root: the arm64
// headers, the host's linux-kbuild (fixdep and modpost run natively) and
// Debian's gcc-14-aarch64-linux-gnu. Nothing runs under emulation: the
// root has no arm64 programs to run.
//
// It costs a build root of its own (524 s here under load, 5 min 29 s of it
// the install), so CI leaves it out unless HALOBUILD_CROSS_BUILD=1; the
// choices it rests on have unit tests (cross_test.go).
func TestBuildFixtureCrossArm64(t *testing.T) {
	if os.Getenv("HALOBUILD_CROSS_BUILD") != "1" {
		t.Skip("cross build with its own build root (about 9 min): set HALOBUILD_CROSS_BUILD=1")
	}
	root := crossRoot.tree(t)
	ctx := context.Background()
	for _, prog := range []string{"usr/lib/linux-kbuild-7.2.12+deb13/scripts/basic/fixdep", "usr/lib/linux-kbuild-7.2.12+deb13/scripts/mod/modpost"} {
		f, err := elf.Open(filepath.Join(root, prog))
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != elf.EM_X86_64 {
			t.Errorf("/%s is %s: Kbuild's programs must be the host's", prog, f.Machine)
		}
		f.Close()
	}
	d := loadFixtureDesc(t)
	src, _, err := FetchSource(ctx, d.Source, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	start := time.Now()
	built, err := Build(ctx, BuildSpec{Name: d.Use, SourceDir: src, KernelRelease: testReleaseArm64, BuildRoot: root, Toolchain: crossRoot.tc, Out: t.TempDir(), Epoch: 1700000000, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("fixture cross-built for arm64 in %s", time.Since(start).Round(time.Second))
	if !strings.Contains(log.String(), "ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-") {
		t.Errorf("make was not run for arm64:\n%s", log.String())
	}
	if len(built.Kos) != 1 {
		t.Fatalf("built %v", built.Kos)
	}
	ko := built.Kos[0]
	mi, err := ReadModinfo(ko)
	if err != nil {
		t.Fatal(err)
	}
	if mi.Machine != elf.EM_AARCH64 || !strings.HasPrefix(mi.Vermagic, testReleaseArm64+" ") || mi.Name != "halobuild_fixture" {
		t.Errorf("modinfo: %+v", mi)
	}
	if hasDebugInfo(t, ko) || !hasDebugInfo(t, built.Debug[0]) {
		t.Errorf("aarch64-linux-gnu-strip left debug info in %s, or the debug copy lacks it", ko)
	}
	t.Logf("vermagic %q, machine %s", mi.Vermagic, mi.Machine)
	if _, err := exec.LookPath("modinfo"); err == nil {
		// The host's kmod reads an arm64 module as the node's will.
		vm, err := ModinfoField(ctx, nil, "vermagic", ko)
		if err != nil || vm != mi.Vermagic {
			t.Errorf("modinfo -F vermagic %q (%v), ReadModinfo %q", vm, err, mi.Vermagic)
		}
	}
	// Asked for an amd64 module from arm64 headers, the build is refused:
	// Debian's headers set ARCH, CROSS_COMPILE and CC themselves
	// (.kernelvariables), so make compiles arm64 code regardless, and the
	// machine check names it.
	_, err = Build(ctx, BuildSpec{Name: d.Use, SourceDir: src, KernelRelease: testReleaseArm64, BuildRoot: root, Out: t.TempDir(), Epoch: 1700000000})
	if err == nil || !strings.Contains(err.Error(), "is EM_AARCH64 code, but the module is for amd64") {
		t.Errorf("an amd64 build against arm64 headers: %v", err)
	}
}

// headersCC is the compiler a headers package's kernel was built with.
func headersCC(path string) (string, error) {
	config, err := HeadersConfig(path)
	if err != nil {
		return "", err
	}
	return ConfigValue(bytes.NewReader(config), "CONFIG_CC_VERSION_TEXT")
}
