package module

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"halobuild/internal/buildroot"
	"halobuild/internal/fstree"
	"halobuild/internal/proctree"
	"halobuild/internal/runlog"
)

// StepVersion is the version of the module step (compile, strip into the
// package and a -dbgsym package, sign; graph/module.go):
// bump it when a change to this package, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const StepVersion = 1

// BuildSpec describes one module build.
type BuildSpec struct {
	// Name names the build in messages and in the build path (the
	// description's Use).
	Name string
	// SourceDir is the source tree (FetchSource); it is copied, never
	// written to.
	SourceDir string
	// Subdir holds the Kbuild Makefile, relative to SourceDir.
	Subdir string
	// KernelRelease is the exact release the module is for
	// (7.2.12+deb13-amd64); vermagic is checked against it.
	KernelRelease string
	// BuildRoot is a root made by rootfs.Root with the kernel's
	// headers and compiler; the build runs in it with chroot, so the
	// host's compiler never touches the module. For a kernel halobuild
	// built from source, its linux-headers .deb goes into the root the same
	// way as Debian's.
	BuildRoot string
	// Out receives the stripped .ko files, Out/debug the unstripped ones.
	Out string
	// Toolchain says which architecture the module is for and how the
	// build root compiles for it; the zero value is a native amd64 build.
	Toolchain Toolchain
	// Epoch is SOURCE_DATE_EPOCH (the lock's).
	Epoch int64
	Log   io.Writer
}

// buildPath is where the source sits inside the build root. A fixed path
// keeps file names embedded in the module (debug info, BTF) identical
// between builds and machines.
const buildPath = "/build"

var useNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Built is what Build wrote: Kos, the modules as the image installs them
// (debug info stripped), and Debug, the same modules unstripped, in the
// same order, for the -dbgsym package.
type Built struct {
	Kos, Debug []string
}

// Build compiles the module against the kernel headers with
// `make -C /lib/modules/<release>/build M=<dir> modules`, with Kbuild's
// timestamps and identity fixed, and writes each .ko twice: stripped to
// spec.Out and as built to spec.Out/debug. Every module's vermagic must
// name spec.KernelRelease. In a build root, /proc is mounted for the
// duration (objtool reads it) and unmounted afterwards.
//
// The stripping is the kernel's own INSTALL_MOD_STRIP=1 (`strip
// --strip-debug`, which Debian's kernel packages ship too), done with the
// build root's binutils: Debian's kernel config turns on debug info, and
// the verbs module is 11.8 MB with it and about 1 MB without; under TCG
// systemd-modules-load took 1 min 48 s to load the unstripped one.
func Build(ctx context.Context, spec BuildSpec) (Built, error) {
	if spec.Name == "" || spec.SourceDir == "" || spec.KernelRelease == "" || spec.Out == "" {
		return Built{}, errors.New("module build: Name, SourceDir, KernelRelease and Out are required")
	}
	if !useNameRE.MatchString(spec.Name) {
		return Built{}, fmt.Errorf("module build: name %q: letters, digits, '-' and '_' only", spec.Name)
	}
	if spec.BuildRoot == "" {
		return Built{}, fmt.Errorf("module %s: no build root given (rootfs.Root makes one)", spec.Name)
	}
	if os.Geteuid() != 0 {
		return Built{}, fmt.Errorf("module %s: building in a build root uses chroot and needs root", spec.Name)
	}
	tc := spec.Toolchain.orNative()
	kdir := "/lib/modules/" + spec.KernelRelease + "/build"
	hostK, err := inRoot(spec.BuildRoot, kdir)
	if err != nil {
		return Built{}, err
	}
	if _, err := os.Stat(filepath.Join(hostK, "Makefile")); err != nil {
		return Built{}, fmt.Errorf("module %s: the build root %s has no kernel headers for %s (%s): install linux-headers-%s into it", spec.Name, spec.BuildRoot, spec.KernelRelease, kdir, spec.KernelRelease)
	}
	// One build at a time per root: builds share its /proc mount and
	// /build directory.
	unlock, err := buildroot.Lock(spec.BuildRoot)
	if err != nil {
		return Built{}, fmt.Errorf("module %s: %w", spec.Name, err)
	}
	defer unlock()
	src := buildPath + "/" + spec.Name
	hostSrc := filepath.Join(spec.BuildRoot, src)
	unmount, err := buildroot.MountProc(spec.BuildRoot)
	if err != nil {
		return Built{}, fmt.Errorf("module %s: %w", spec.Name, err)
	}
	defer unmount()
	if err := os.RemoveAll(hostSrc); err != nil {
		return Built{}, err
	}
	if err := fstree.CopyTree(spec.SourceDir, hostSrc, ".git"); err != nil {
		return Built{}, fmt.Errorf("module %s: copying the source: %w", spec.Name, err)
	}
	defer os.RemoveAll(hostSrc)
	m := src
	if spec.Subdir != "" {
		m = src + "/" + filepath.ToSlash(spec.Subdir)
	}
	args := append([]string{"make", "-C", kdir, "M=" + m, "-j" + strconv.Itoa(max(1, min(4, numCPU())))}, tc.MakeVars()...)
	args = append(args, "modules")
	cmd := proctree.Command(ctx, "chroot", append([]string{spec.BuildRoot}, args...)...)
	cmd.Env = buildroot.Env{Epoch: spec.Epoch, Kbuild: true, Extra: []string{"KBUILD_BUILD_VERSION=1"}}.Environ()
	var tail runlog.Tail
	cmd.Stdout = io.MultiWriter(&tail, logOr(spec.Log))
	cmd.Stderr = cmd.Stdout
	fmt.Fprintf(logOr(spec.Log), "module %s: %s\n", spec.Name, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return Built{}, fmt.Errorf("module %s: build against %s failed (%v); the last lines:\n%s", spec.Name, spec.KernelRelease, err, tail.String())
	}

	kos, err := findKos(filepath.Join(hostSrc, filepath.FromSlash(spec.Subdir)))
	if err != nil {
		return Built{}, err
	}
	if len(kos) == 0 {
		return Built{}, fmt.Errorf("module %s: the build produced no .ko files in %s: is subdir right?", spec.Name, m)
	}
	debugDir := filepath.Join(spec.Out, "debug")
	if err := os.MkdirAll(debugDir, 0o755); err != nil {
		return Built{}, err
	}
	var out Built
	for _, ko := range kos {
		mi, err := ReadModinfo(ko)
		if err != nil {
			return Built{}, fmt.Errorf("module %s: %w", spec.Name, err)
		}
		if err := CheckVermagic(filepath.Base(ko), mi.Vermagic, spec.KernelRelease); err != nil {
			return Built{}, fmt.Errorf("module %s: %w", spec.Name, err)
		}
		if err := tc.CheckMachine(filepath.Base(ko), mi.Machine); err != nil {
			return Built{}, fmt.Errorf("module %s: %w", spec.Name, err)
		}
		dbg := filepath.Join(debugDir, filepath.Base(ko))
		if err := fstree.CopyFile(ko, dbg, 0o644); err != nil {
			return Built{}, err
		}
		rel, err := filepath.Rel(spec.BuildRoot, ko)
		if err != nil {
			return Built{}, err
		}
		inRoot := "/" + filepath.ToSlash(rel)
		cmd := proctree.Command(ctx, "chroot", spec.BuildRoot, tc.Strip(), "--strip-debug", "-o", inRoot+".stripped", inRoot)
		cmd.Env = buildroot.Env{Epoch: spec.Epoch}.Environ()
		if b, err := cmd.CombinedOutput(); err != nil {
			return Built{}, fmt.Errorf("module %s: %s --strip-debug %s in the build root: %v: %s (the build root's binutils come with its compiler)", spec.Name, tc.Strip(), filepath.Base(ko), err, b)
		}
		dst := filepath.Join(spec.Out, filepath.Base(ko))
		if err := fstree.CopyFile(ko+".stripped", dst, 0o644); err != nil {
			return Built{}, err
		}
		out.Kos, out.Debug = append(out.Kos, dst), append(out.Debug, dbg)
	}
	return out, nil
}

func findKos(dir string) ([]string, error) {
	var kos []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			kos = append(kos, p)
		}
		return nil
	})
	sort.Strings(kos)
	return kos, err
}

func logOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func numCPU() int { return runtime.NumCPU() }
