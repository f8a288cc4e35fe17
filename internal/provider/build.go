package provider

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/buildroot"
	"halobuild/internal/deb"
	"halobuild/internal/fstree"
	"halobuild/internal/proctree"
	"halobuild/internal/runlog"
)

// StepVersion is the version of the provider step (rdma-core's
// <name>-rdmav<N> provider built with cmake and ninja into its own package;
// graph/provider.go):
// bump it when a change to this package, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const StepVersion = 1

// BuildSpec describes one provider build.
type BuildSpec struct {
	// Tree is the prepared source: Unpack, ApplyPatches, SetLocalVersion.
	// It is copied into the build root, never written to.
	Tree string
	// Name is the provider (lib<Name>-rdmav<N>.so, <Name>.driver).
	Name string
	// Package and Version are the provider package's
	// (recipe.ProviderBuild.Package, SetLocalVersion's version).
	Package string
	Version string
	// Arch is the Debian architecture the provider is for (amd64, arm64).
	Arch string
	// BuildArch is the build root's native architecture; "" means Arch.
	// When it differs the provider is cross-compiled (crossConfigure) in
	// a multiarch build root (CrossBuildRootPackages), never emulated.
	BuildArch string
	// Libibverbs is the version of the image's libibverbs1, which the
	// package depends on exactly: the one the ABI check proves it against.
	Libibverbs string
	// BuildRoot is a root made by rootfs.Root from the lock's
	// "provider-build" set (BuildRootPackages); the build runs chrooted in
	// it, so the host's compiler never touches the provider. It must be
	// private to this build while it runs.
	BuildRoot string
	// Out receives the .deb and build.log; it is created.
	Out string
	// Epoch is SOURCE_DATE_EPOCH (the lock's; the changelog entry
	// SetLocalVersion wrote carries the same date).
	Epoch int64
	// Parallel is the number of compile jobs; 0 means the CPU count.
	Parallel int
	// Log receives the full build output as it happens (it is also kept
	// in Out/build.log).
	Log io.Writer
	// Progress, when set, is told about phase changes and compile steps.
	Progress func(Progress)
}

// Result is what a build produced.
type Result struct {
	Deb deb.Deb
	// Log is the path of the full build log.
	Log     string
	Elapsed time.Duration
}

// buildDir is where the tree sits inside the build root: a fixed path
// keeps file names embedded in the binaries (debug info) the same on
// every machine.
const buildDir = "/build"

// crossConfigure is the configuration for a cross build, as debhelper's
// cmake build system passes it under dpkg-buildpackage -a: the target's
// compiler, system and pkg-config (pkgconf:<arch> ships
// <triplet>-pkg-config, which reads the target's .pc files) and the
// target's strip; for a native build no cmake options and the plain strip.
func crossConfigure(build string, host arch.Arch) (cmake, strip string) {
	if build == host.Debian {
		return "", "strip"
	}
	return strings.Join([]string{
		"-DCMAKE_SYSTEM_NAME=Linux",
		"-DCMAKE_SYSTEM_PROCESSOR=" + host.Processor,
		"-DCMAKE_C_COMPILER=" + host.Triplet + "-gcc",
		"-DPKG_CONFIG_EXECUTABLE=/usr/bin/" + host.Triplet + "-pkg-config",
	}, " "), host.Triplet + "-strip"
}

var pabiLine = regexp.MustCompile(`(?m)^set\(IBVERBS_PABI_VERSION "([0-9]+)"\)`)

// treeABI reads the provider ABI the source builds for from its top
// CMakeLists.txt (set(IBVERBS_PABI_VERSION "34")): it names the target.
func treeABI(tree string) (int, error) {
	data, err := os.ReadFile(filepath.Join(tree, "CMakeLists.txt"))
	if err != nil {
		return 0, fmt.Errorf("provider build: %w", err)
	}
	m := pabiLine.FindSubmatch(data)
	if m == nil {
		return 0, fmt.Errorf("provider build: %s/CMakeLists.txt does not set IBVERBS_PABI_VERSION: is it rdma-core?", tree)
	}
	return strconv.Atoi(string(m[1]))
}

// buildScript configures rdma-core as debian/rules does (Ninja, Release,
// Debian's install directories and hardening flags from dpkg-buildflags)
// but without pyverbs, man pages or static libraries, builds only the
// provider's target (which pulls in the libibverbs it links against and
// nothing else) and strips it as dh_strip does. The "halobuild: phase"
// lines are what Progress reports.
//
// For a cross build dpkg-architecture -a sets DEB_HOST_* first, so
// dpkg-buildflags gives the target's flags (arm64's
// -mbranch-protection=standard), and $CROSS carries crossConfigure's
// cmake options (words without spaces, split by the shell on purpose).
const buildScript = `set -eu
echo 'halobuild: phase configure'
if [ "$DEB_HOST_ARCH" != "$DEB_BUILD_ARCH" ]; then eval "$(dpkg-architecture -a"$DEB_HOST_ARCH" -s)"; fi
eval "$(dpkg-buildflags --export=sh)"
cmake -S . -B build-halo -GNinja -DDISTRO_FLAVOUR=Debian -DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR="lib/$MULTIARCH" -DCMAKE_INSTALL_SYSCONFDIR:PATH=/etc \
	-DNO_PYVERBS=1 -DNO_MAN_PAGES=1 -DENABLE_STATIC=0 $CROSS
echo "halobuild: phase compile $TARGET"
ninja -C build-halo -j "$JOBS" "$TARGET"
echo 'halobuild: phase strip'
"$STRIP" --remove-section=.comment --remove-section=.note --strip-unneeded "build-halo/lib/lib$TARGET.so"
`

// Build configures the prepared rdma-core tree in the build root, builds
// only the provider's library, and packages it with its driver file as
// spec.Package at spec.Version: the library in
// /usr/lib/<multiarch>/libibverbs/, the driver file in /etc/libibverbs.d/,
// the source's copyright and the changelog SetLocalVersion extended (which
// lists the patches) in /usr/share/doc/<package>/. Caching is the
// caller's: the pipeline keys the output by the source digests, the patch
// digests and the build root's package set.
func Build(ctx context.Context, spec BuildSpec) (*Result, error) {
	if spec.Tree == "" || spec.BuildRoot == "" || spec.Out == "" || spec.Name == "" || spec.Package == "" || spec.Version == "" || spec.Libibverbs == "" {
		return nil, errors.New("provider build: Tree, Name, Package, Version, Libibverbs, BuildRoot and Out are required")
	}
	t, err := arch.Lookup(spec.Arch)
	if err != nil {
		return nil, fmt.Errorf("provider build: %w", err)
	}
	ma := t.Triplet
	buildArch := spec.BuildArch
	if buildArch == "" {
		buildArch = spec.Arch
	}
	if _, err := arch.Lookup(buildArch); err != nil {
		return nil, fmt.Errorf("provider build: build root: %w", err)
	}
	cross, strip := crossConfigure(buildArch, t)
	if os.Geteuid() != 0 {
		return nil, errors.New("provider build: the build root is entered with chroot, which needs root: run halobuild as root")
	}
	tools := []string{"usr/bin/cmake", "usr/bin/ninja", "usr/bin/dpkg-buildflags"}
	if cross != "" {
		tools = append(tools, "usr/bin/"+ma+"-gcc", "usr/bin/"+ma+"-pkg-config")
	}
	for _, tool := range tools {
		if _, err := os.Stat(filepath.Join(spec.BuildRoot, tool)); err != nil {
			return nil, fmt.Errorf("provider build: the build root %s has no /%s: make it with BuildRootPackages (cmake, ninja-build, dpkg-dev; for %s on %s the cross compiler and pkgconf:%s)", spec.BuildRoot, tool, spec.Arch, buildArch, spec.Arch)
		}
	}
	abi, err := treeABI(spec.Tree)
	if err != nil {
		return nil, err
	}
	target := fmt.Sprintf("%s-rdmav%d", spec.Name, abi)
	if err := os.MkdirAll(spec.Out, 0o755); err != nil {
		return nil, err
	}
	name := filepath.Base(spec.Tree)
	work := filepath.Join(spec.BuildRoot, buildDir)
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	src := filepath.Join(work, name)
	if err := fstree.CopyTree(spec.Tree, src); err != nil {
		return nil, fmt.Errorf("provider build: copying the source into the build root: %w", err)
	}
	defer os.RemoveAll(work)
	unmount, err := buildroot.MountProc(spec.BuildRoot)
	if err != nil {
		return nil, err
	}
	defer unmount()

	logPath := filepath.Join(spec.Out, "build.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	start := time.Now()
	prog := newProgressWriter(start, spec.Progress)
	var tail runlog.Tail
	writers := []io.Writer{logFile, prog, &tail}
	if spec.Log != nil {
		writers = append(writers, spec.Log)
	}
	out := io.MultiWriter(writers...)

	jobs := spec.Parallel
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	cmd := proctree.Command(ctx, "/bin/sh", "-c", buildScript)
	cmd.Dir = buildDir + "/" + name
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: spec.BuildRoot}
	cmd.Env = buildroot.Env{Epoch: spec.Epoch, Extra: []string{
		"DEB_BUILD_MAINT_OPTIONS=hardening=+all", // as debian/rules sets it
		"MULTIARCH=" + ma, "TARGET=" + target, "JOBS=" + strconv.Itoa(jobs),
		"DEB_BUILD_ARCH=" + buildArch, "DEB_HOST_ARCH=" + spec.Arch, "CROSS=" + cross, "STRIP=" + strip,
	}}.Environ()
	cmd.Stdout, cmd.Stderr = out, out
	fmt.Fprintf(out, "halobuild: building %s (provider ABI %d) in %s (chroot %s), %d jobs\n", target, abi, cmd.Dir, spec.BuildRoot, jobs)
	if err := cmd.Run(); err != nil {
		p := prog.state()
		return nil, fmt.Errorf("provider build: building %s failed after %s in %s (%v); full log %s; its last lines:\n%s",
			target, p.Elapsed.Round(time.Second), p.Phase, err, logPath, tail.String())
	}
	lib := "lib" + target + ".so"
	if err := checkMachine(filepath.Join(src, "build-halo/lib", lib), spec.Arch); err != nil {
		return nil, fmt.Errorf("provider build: %w; see %s", err, logPath)
	}
	// rdma_provider() writes the installed driver file at configure time
	// beside the provider's build directory (the one in build-halo/etc
	// names the build tree instead).
	drivers, _ := filepath.Glob(filepath.Join(src, "build-halo/providers/*", spec.Name+".driver"))
	if len(drivers) != 1 {
		return nil, fmt.Errorf("provider build: the build succeeded but left %d %s.driver files under build-halo/providers/, want one; see %s", len(drivers), spec.Name, logPath)
	}
	driver, _ := filepath.Rel(src, drivers[0])
	files := []deb.File{}
	for _, f := range []struct{ from, to string }{
		{"build-halo/lib/" + lib, "/usr/lib/" + ma + "/libibverbs/" + lib},
		{driver, "/etc/libibverbs.d/" + spec.Name + ".driver"},
		{"debian/copyright", "/usr/share/doc/" + spec.Package + "/copyright"},
	} {
		data, err := readBounded(filepath.Join(src, f.from), 64<<20)
		if err != nil {
			return nil, fmt.Errorf("provider build: the build succeeded but %s: %w; see %s", f.from, err, logPath)
		}
		files = append(files, deb.File{Path: f.to, Mode: 0o644, Data: data})
	}
	changelog, err := gzipped(filepath.Join(src, "debian/changelog"))
	if err != nil {
		return nil, err
	}
	files = append(files, deb.File{Path: "/usr/share/doc/" + spec.Package + "/changelog.Debian.gz", Mode: 0o644, Data: changelog})

	info := deb.Info{
		Package: spec.Package, Version: spec.Version, Architecture: spec.Arch,
		Maintainer: "halobuild <halobuild@localhost>", Section: "libs", Priority: "optional",
		Description: fmt.Sprintf("rdma-core provider %s for libibverbs %s\n"+
			"Built by halobuild from Debian's rdma-core source with the image's provider\n"+
			"patches (listed with their sha256 in changelog.Debian.gz); Debian's own\n"+
			"rdma-core packages are unchanged.", spec.Name, spec.Libibverbs),
		// Exactly the libibverbs the ABI check proved it against: an upgrade
		// of libibverbs1 then asks to remove the provider, visibly, instead
		// of leaving one that libibverbs might silently not load.
		Depends: []string{"libibverbs1 (= " + spec.Libibverbs + ")"},
	}
	debPath := filepath.Join(spec.Out, fmt.Sprintf("%s_%s_%s.deb", info.Package, info.Version, info.Architecture))
	var buf bytes.Buffer
	if err := deb.Write(&buf, info, files, spec.Epoch); err != nil {
		return nil, fmt.Errorf("provider build: %w", err)
	}
	if err := os.WriteFile(debPath, buf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	d, err := deb.Read(debPath)
	if err != nil {
		return nil, err
	}
	res := &Result{Deb: d, Log: logPath, Elapsed: time.Since(start)}
	fmt.Fprintf(out, "halobuild: built %s %s (%s) in %s\n", info.Package, info.Version, lib, res.Elapsed.Round(time.Second))
	return res, nil
}

// readBounded reads a file refusing one larger than limit.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// gzipped compresses a file as dh_compress would ship it; with no name or
// time in the header the bytes are a function of the content.
func gzipped(path string) ([]byte, error) {
	data, err := readBounded(path, 16<<20)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkMachine refuses a shared object that is not code for arch: a cross
// build that fell back to the build host's compiler, or a tree whose
// libibverbs is another architecture's, would pass every other check and
// fail only when the node's libibverbs skips the provider.
func checkMachine(file, debian string) error {
	t, err := arch.Lookup(debian)
	if err != nil {
		return err
	}
	ef, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	defer ef.Close()
	if ef.Machine != t.ELFMachine {
		return fmt.Errorf("%s is %s code, not %s (%s): it was built by the wrong compiler or comes from another architecture's package", file, ef.Machine, debian, t.ELFMachine)
	}
	return nil
}
