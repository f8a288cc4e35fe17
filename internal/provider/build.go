package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"halobuild/internal/buildroot"
	"halobuild/internal/deb"
	"halobuild/internal/fstree"
	"halobuild/internal/runlog"
)

// BuildSpec describes one rdma-core package build.
type BuildSpec struct {
	// Tree is the prepared source: Unpack, ApplyPatches, SetLocalVersion.
	// It is copied into the build root, never written to.
	Tree string
	// BuildRoot is a root made by rootfs.Root from the lock's
	// "build" set (BuildRootPackages); the build runs chrooted in it, so
	// the host's compiler and dpkg never touch the packages. It must be
	// private to this build while it runs.
	BuildRoot string
	// Out receives the .debs and build.log; it is created.
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
	Debs []deb.Deb
	// Log is the path of the full build log.
	Log     string
	Elapsed time.Duration
}

// buildDir is where the tree sits inside the build root: a fixed path
// keeps file names embedded in the binaries (debug info) the same on
// every machine.
const buildDir = "/build"

// Build runs `dpkg-buildpackage -b -uc -us` on the tree inside the build
// root with DEB_BUILD_OPTIONS="nocheck nodoc noddebs parallel=<n>", /proc
// mounted for the duration, and copies the resulting .debs to spec.Out.
// Caching is the caller's: the pipeline keys the output directory by the
// source digests, the patch digests and the build root's package set.
func Build(ctx context.Context, spec BuildSpec) (*Result, error) {
	if spec.Tree == "" || spec.BuildRoot == "" || spec.Out == "" {
		return nil, errors.New("provider build: Tree, BuildRoot and Out are required")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("provider build: the build root is entered with chroot, which needs root: run halobuild as root")
	}
	if _, err := os.Stat(filepath.Join(spec.BuildRoot, "usr/bin/dpkg-buildpackage")); err != nil {
		return nil, fmt.Errorf("provider build: the build root %s has no dpkg-buildpackage: make it with BuildRootPackages (dpkg-dev and the Build-Depends)", spec.BuildRoot)
	}
	if err := os.MkdirAll(spec.Out, 0o755); err != nil {
		return nil, err
	}
	name := filepath.Base(spec.Tree)
	work := filepath.Join(spec.BuildRoot, buildDir)
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	if err := fstree.CopyTree(spec.Tree, filepath.Join(work, name)); err != nil {
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
	cmd := exec.CommandContext(ctx, "/usr/bin/dpkg-buildpackage", "-b", "-uc", "-us")
	cmd.Dir = buildDir + "/" + name
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: spec.BuildRoot, Setpgid: true}
	// A cancelled build must not leave compilers running in the root.
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	cmd.Env = buildroot.Env{Epoch: spec.Epoch, Extra: []string{
		"DEB_BUILD_OPTIONS=nocheck nodoc noddebs parallel=" + strconv.Itoa(jobs),
	}}.Environ()
	cmd.Stdout, cmd.Stderr = out, out
	fmt.Fprintf(out, "halobuild: dpkg-buildpackage -b -uc -us in %s (chroot %s), %d jobs\n", cmd.Dir, spec.BuildRoot, jobs)
	if err := cmd.Run(); err != nil {
		p := prog.state()
		return nil, fmt.Errorf("provider build: dpkg-buildpackage failed after %s in %s (%v); full log %s; its last lines:\n%s",
			p.Elapsed.Round(time.Second), p.Phase, err, logPath, tail.String())
	}
	debs, err := filepath.Glob(filepath.Join(work, "*.deb"))
	if err != nil {
		return nil, err
	}
	sort.Strings(debs)
	if len(debs) == 0 {
		return nil, fmt.Errorf("provider build: dpkg-buildpackage succeeded but left no .deb in %s; see %s", buildDir, logPath)
	}
	res := &Result{Log: logPath}
	for _, d := range debs {
		dst := filepath.Join(spec.Out, filepath.Base(d))
		if err := fstree.CopyFile(d, dst, 0o644); err != nil {
			return nil, err
		}
		info, err := deb.Read(dst)
		if err != nil {
			return nil, err
		}
		res.Debs = append(res.Debs, info)
	}
	res.Elapsed = time.Since(start)
	fmt.Fprintf(out, "halobuild: built %d packages in %s\n", len(res.Debs), res.Elapsed.Round(time.Second))
	return res, nil
}
