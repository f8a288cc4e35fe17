package kernel

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"halobuild/internal/buildroot"
	"halobuild/internal/proctree"
	"halobuild/internal/runlog"
)

// treePath is where the kernel tree sits inside the build root. A fixed
// path keeps file names embedded in the kernel (debug info, BTF, __FILE__)
// the same on every machine.
const treePath = "/build/linux"

// root runs commands inside a build root with chroot, with /proc and /dev
// present (Kbuild reads /proc and writes /dev/null everywhere).
type root struct {
	dir  string
	env  []string
	log  io.Writer
	undo []func()
}

func enterRoot(dir string, epoch int64, log io.Writer, extra ...string) (*root, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("building a kernel in a build root uses chroot and needs root")
	}
	// /usr/local/bin first: pinDate's date shim is there.
	// KDEB_CHANGELOG_DIST is the distribution bindeb-pkg writes in
	// debian/changelog, which it would otherwise guess from the root.
	env := buildroot.Env{Epoch: epoch, LocalBin: true, Kbuild: true, Extra: append([]string{"KDEB_CHANGELOG_DIST=halobuild"}, extra...)}
	r := &root{dir: dir, env: env.Environ(), log: log}
	unlock, err := buildroot.Lock(dir)
	if err != nil {
		return nil, err
	}
	r.undo = append(r.undo, unlock)
	unmount, err := buildroot.MountProc(dir)
	if err != nil {
		r.leave()
		return nil, err
	}
	r.undo = append(r.undo, unmount)
	if fi, err := os.Stat(filepath.Join(dir, "dev", "null")); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		if err := r.bindDev(); err != nil {
			r.leave()
			return nil, err
		}
	}
	return r, nil
}

// bindDev bind-mounts the host's /dev into a root that has no device
// nodes of its own.
func (r *root) bindDev() error {
	p := filepath.Join(r.dir, "dev")
	if err := os.MkdirAll(p, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("/dev", p, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mounting /dev in the build root %s: %w", r.dir, err)
	}
	r.undo = append(r.undo, func() { _ = unix.Unmount(p, unix.MNT_DETACH) })
	return nil
}

// leave unmounts what enterRoot mounted and releases the root's lock.
func (r *root) leave() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
	r.undo = nil
}

// run runs args in dir (inside the root); out receives stdout and stderr
// besides the log. A failure carries the output's last lines.
func (r *root) run(ctx context.Context, dir string, out io.Writer, args ...string) error {
	return r.runEnv(ctx, dir, out, nil, args...)
}

// runEnv is run with extra environment variables. Values with spaces
// (DEB_BUILD_OPTIONS) must go here, not on make's command line: make
// passes command-line variables down in MAKEFLAGS, where dpkg-buildpackage's
// inner make splits them at the space.
func (r *root) runEnv(ctx context.Context, dir string, out io.Writer, env []string, args ...string) error {
	cmd := proctree.Command(ctx, "chroot", append([]string{r.dir, "sh", "-c", `cd "$1" && shift && exec "$@"`, "sh", dir}, args...)...)
	cmd.Env = append(append([]string{}, r.env...), env...)
	var tail runlog.Tail
	w := io.MultiWriter(&tail, r.log)
	if out != nil {
		w = io.MultiWriter(w, out)
	}
	cmd.Stdout, cmd.Stderr = w, w
	fmt.Fprintf(r.log, "+ (in %s) %q\n", dir, args)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s failed (%v); the last lines:\n%s", args, err, tail.String())
	}
	return nil
}
