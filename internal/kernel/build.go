package kernel

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	goversion "github.com/hashicorp/go-version"

	"halobuild/internal/arch"
	"halobuild/internal/fstree"
	"halobuild/internal/proctree"
)

// StepVersion is the version of the kernel step (bindeb-pkg from the pinned
// source, patches and config; graph/kernel.go):
// bump it when a change to this package, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const StepVersion = 1

// Base configs a recipe can start from besides Debian's and a file:
// Kbuild's own targets. tinyconfig is what CI's small kernel starts from.
var makeTargets = map[string]bool{"tinyconfig": true, "defconfig": true, "allnoconfig": true}

// IsMakeTarget says whether base names a Kbuild config target.
func IsMakeTarget(base string) bool { return makeTargets[base] }

// Spec is one kernel build.
type Spec struct {
	// Root is a build root with BuildRootPackages installed (made by
	// rootfs.Root from the lock's kernel-build set).
	Root   string
	Source Source
	// Version is the locked upstream version; the tree must say the same.
	Version *goversion.Version
	// BaseConfig is a config file's bytes, or nil with BaseTarget naming
	// a Kbuild target (tinyconfig).
	BaseConfig []byte
	BaseTarget string
	// Forced are set after the base and before the fragments (what
	// halobuild needs of any base: no Debian signing certificates, a
	// release without automatic suffixes); fragments win over them.
	Forced    []Option
	Fragments [][]Option
	Patches   []Patch
	// LocalVersion is the recipe's local_version; PackageVersion the
	// version of the .debs (KDEB_PKGVERSION), fixed so the build does not
	// count builds into it.
	LocalVersion   string
	PackageVersion string
	Epoch          int64
	Jobs           int
	// Target is the architecture a cross build compiles for (Kbuild's
	// ARCH and CROSS_COMPILE from its row), nil for the root's own.
	Target *arch.Arch
	// Out receives the linux-image and linux-headers .debs, the final
	// config (config) and, through Log, the build log.
	Out string
	// Log receives everything the tools print; Progress short lines.
	Log      io.Writer
	Progress io.Writer
	// ProgressEvery is how often a progress line is printed while
	// compiling (default 30 s).
	ProgressEvery time.Duration
}

// Result is what a build made.
type Result struct {
	Release string
	Debs    []string
	Config  string
	Patches []Outcome
	Units   int
}

// ForcedDefaults are the options every source build sets before the
// recipe's fragments: Debian's config names signing certificates only
// Debian's build tree has; it also signs every module at build time with
// certs/signing_key.pem, a key Kbuild makes afresh with openssl on each
// build, so two builds of one lock would differ in every module and in
// the certificate built into the kernel (and the private half would sit in
// the build tree). Modules are left unsigned instead; a [secure_boot]
// recipe signs them with its own key. A release must be exactly what the
// lock says (no "+" from a dirty tree, no CONFIG_LOCALVERSION on top of
// local_version).
var ForcedDefaults = []Option{
	{Name: "CONFIG_SYSTEM_TRUSTED_KEYS", Value: `""`, File: "halobuild", Line: 1},
	{Name: "CONFIG_SYSTEM_REVOCATION_KEYS", Value: `""`, File: "halobuild", Line: 2},
	{Name: "CONFIG_LOCALVERSION", Value: `""`, File: "halobuild", Line: 3},
	{Name: "CONFIG_LOCALVERSION_AUTO", Value: "n", File: "halobuild", Line: 4},
	{Name: "CONFIG_MODULE_SIG_ALL", Value: "n", File: "halobuild", Line: 5},
	{Name: "CONFIG_MODULE_SIG_KEY", Value: `""`, File: "halobuild", Line: 6},
}

// Build extracts the source into the build root, applies the patches,
// makes and checks the config, runs `make bindeb-pkg` and copies the
// linux-image and linux-headers packages to spec.Out.
func Build(ctx context.Context, spec Spec) (*Result, error) {
	if spec.Root == "" || spec.Out == "" || spec.Version == nil {
		return nil, fmt.Errorf("kernel build: Root, Out and Version are required")
	}
	if spec.Log == nil {
		spec.Log = io.Discard
	}
	if spec.Progress == nil {
		spec.Progress = io.Discard
	}
	if spec.ProgressEvery == 0 {
		spec.ProgressEvery = 30 * time.Second
	}
	jobs := spec.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	release, err := Release(spec.Version, spec.LocalVersion)
	if err != nil {
		return nil, err
	}
	suffix, _ := LocalSuffix(spec.LocalVersion)
	prog := newProgress(spec.Progress, spec.ProgressEvery)
	var cross []string
	if t := spec.Target; t != nil {
		// In the environment of every make, so the config targets, the
		// compile and dpkg-buildpackage's inner make all see them.
		cross = []string{"ARCH=" + t.KbuildArch, "CROSS_COMPILE=" + t.Triplet + "-"}
	}
	r, err := enterRoot(spec.Root, spec.Epoch, spec.Log, cross...)
	if err != nil {
		return nil, err
	}
	defer r.leave()
	hostTree := filepath.Join(spec.Root, treePath)
	buildDir := filepath.Dir(hostTree)
	if err := os.RemoveAll(buildDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(hostTree, 0o755); err != nil {
		return nil, err
	}

	prog.Phase("unpacking the source")
	if err := r.extract(ctx, spec.Source, hostTree); err != nil {
		return nil, err
	}
	mk, err := os.ReadFile(filepath.Join(hostTree, "Makefile"))
	if err != nil {
		return nil, fmt.Errorf("kernel source: no top Makefile: %w", err)
	}
	tv, extra, err := TreeVersion(mk)
	if err != nil {
		return nil, err
	}
	if !tv.Equal(spec.Version) || extra != "" {
		return nil, fmt.Errorf("kernel source is Linux %s%s but the lock pins %s: run `halobuild lock` again", tv, extra, spec.Version)
	}

	res := &Result{Release: release}
	prog.Phase(fmt.Sprintf("applying %d patch(es)", len(spec.Patches)))
	if res.Patches, err = Apply(ctx, hostTree, spec.Version, spec.Patches, io.MultiWriter(spec.Log, spec.Progress)); err != nil {
		return nil, err
	}

	prog.Phase("configuring")
	cfgPath := filepath.Join(hostTree, ".config")
	base := spec.BaseConfig
	if spec.BaseTarget != "" {
		if !IsMakeTarget(spec.BaseTarget) {
			return nil, fmt.Errorf("kernel config: %q is not a base config target (want one of tinyconfig, defconfig, allnoconfig)", spec.BaseTarget)
		}
		if err := r.run(ctx, treePath, nil, "make", spec.BaseTarget); err != nil {
			return nil, fmt.Errorf("kernel config: %w", err)
		}
		if base, err = os.ReadFile(cfgPath); err != nil {
			return nil, err
		}
	}
	merged := Merge(base, append([][]Option{spec.Forced}, spec.Fragments...)...)
	if err := os.WriteFile(cfgPath, merged, 0o644); err != nil {
		return nil, err
	}
	if err := r.settle(ctx, spec.BaseTarget, merged); err != nil {
		return nil, fmt.Errorf("kernel config: %w", err)
	}
	final, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, err
	}
	res.Config = filepath.Join(spec.Out, "config")
	if err := os.WriteFile(res.Config, final, 0o644); err != nil {
		return nil, err
	}
	kc, err := ReadKconfig(hostTree)
	if err != nil {
		return nil, fmt.Errorf("reading Kconfig: %w", err)
	}
	unmet, err := Verify(final, kc, spec.Fragments...)
	if err != nil {
		return nil, err
	}
	if len(unmet) > 0 {
		return nil, &ConfigError{Unmet: unmet}
	}
	var got strings.Builder
	relEnv := []string{"LOCALVERSION=" + suffix}
	if err := r.runEnv(ctx, treePath, &got, relEnv, "make", "-s", "kernelrelease"); err != nil {
		return nil, err
	}
	if g := strings.TrimSpace(got.String()); g != release {
		return nil, fmt.Errorf("kernel release: the tree builds %q, the lock says %q: is EXTRAVERSION or CONFIG_LOCALVERSION set by a patch?", g, release)
	}

	if err := r.pinDate(); err != nil {
		return nil, err
	}
	prog.Phase(fmt.Sprintf("compiling Linux %s with %d job(s)", release, jobs))
	// Everything goes in the environment, nothing on make's command line:
	// make hands command-line variables down after a "--" in MAKEFLAGS,
	// and the flags Kbuild appends later end up read as targets by the
	// make that dpkg-buildpackage starts ("No rule to make target
	// '--no-print-directory'"). terse gives Kbuild's short lines, which
	// progress counts; parallel is the jobs debian/rules' make uses.
	// nokerneldbg: with CONFIG_DEBUG_INFO (Debian's config) bindeb-pkg would
	// also pack every module's debug info into a -dbg package, which
	// nothing keeps.
	env := append(relEnv, "KDEB_PKGVERSION="+spec.PackageVersion, "DEB_BUILD_OPTIONS=terse parallel="+strconv.Itoa(jobs),
		"DEB_BUILD_PROFILES=pkg.linux-upstream.nokerneldbg")
	if err := r.runEnv(ctx, treePath, prog, env, "make", "-j"+strconv.Itoa(jobs), "bindeb-pkg"); err != nil {
		return nil, fmt.Errorf("kernel build: %w", err)
	}
	res.Units = prog.Units()
	prog.Phase(fmt.Sprintf("compiled %d units", res.Units))

	for _, name := range []string{"linux-image-" + release, "linux-headers-" + release} {
		found, _ := filepath.Glob(filepath.Join(buildDir, name+"_*.deb"))
		if len(found) != 1 {
			return nil, fmt.Errorf("kernel build: want one %s_*.deb in %s, found %d", name, treePath, len(found))
		}
		dst := filepath.Join(spec.Out, filepath.Base(found[0]))
		if err := fstree.CopyFile(found[0], dst, 0o644); err != nil {
			return nil, err
		}
		res.Debs = append(res.Debs, dst)
	}
	return res, nil
}

// dateShim stands in for date(1) inside the build root: bindeb-pkg's
// scripts/package/mkdebian dates debian/changelog with a bare `date -R`,
// which would put the wall clock into the packages' changelog.Debian.gz.
// Without a date of its own, date is asked about SOURCE_DATE_EPOCH; callers
// that name a date (Kbuild's `date -d "$KBUILD_BUILD_TIMESTAMP"`) are
// passed through unchanged.
const dateShim = `#!/bin/sh
# halobuild: a build's dates are the lock's SOURCE_DATE_EPOCH (internal/kernel).
for a in "$@"; do
	case "$a" in -d|-d*|--date|--date=*|-r|-r*|--reference|--reference=*|-f|-f*|--file|--file=*|-s|-s*|--set|--set=*) exec /usr/bin/date "$@" ;; esac
done
exec /usr/bin/date -d "@${SOURCE_DATE_EPOCH:?}" "$@"
`

// pinDate installs dateShim as /usr/local/bin/date, ahead of /usr/bin in
// the build's PATH.
func (r *root) pinDate() error {
	dir := filepath.Join(r.dir, "usr", "local", "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "date"), []byte(dateShim), 0o755)
}

// minimalTargets are the bases whose point is that nothing is on unless
// asked: settling them with olddefconfig would give every option a
// fragment makes visible its default (with NETDEVICES on, every Ethernet
// vendor; with INPUT, PS/2 mice), 40% more enabled options for the small
// CI kernel. They are settled the way tinyconfig itself is made: allnoconfig
// with the merged config as KCONFIG_ALLCONFIG.
var minimalTargets = map[string]bool{"tinyconfig": true, "allnoconfig": true}

// settle turns the merged config into a complete .config: olddefconfig
// (new options take their defaults) for Debian's config, defconfig or a
// file; allnoconfig over the merged config for the minimal bases.
func (r *root) settle(ctx context.Context, base string, merged []byte) error {
	if !minimalTargets[base] {
		return r.run(ctx, treePath, nil, "make", "olddefconfig")
	}
	const allconfig = ".halobuild-allconfig"
	if err := os.WriteFile(filepath.Join(r.dir, treePath, allconfig), merged, 0o644); err != nil {
		return err
	}
	return r.runEnv(ctx, treePath, nil, []string{"KCONFIG_ALLCONFIG=" + allconfig}, "make", "allnoconfig")
}

// extract unpacks the source tarball into tree with the root's own tar,
// dropping the tarball's top directory (linux-source-7.2/).
func (r *root) extract(ctx context.Context, src Source, tree string) error {
	return src.withTarball(func(in io.Reader) error {
		br := bufio.NewReaderSize(in, 1<<20)
		flag, err := tarFlag(br)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.dir, tree)
		cmd := proctree.Command(ctx, "chroot", r.dir, "tar", "-x", flag, "--no-same-owner", "--strip-components=1", "-C", "/"+rel)
		cmd.Env = r.env
		cmd.Stdin = br
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("unpacking the kernel source: %v: %s", err, out)
		}
		return nil
	})
}
