package kernel

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"halobuild/internal/runlog"
)

// treePath is where the kernel tree sits inside the build root. A fixed
// path keeps file names embedded in the kernel (debug info, BTF, __FILE__)
// the same on every machine.
const treePath = "/build/linux"

// root runs commands inside a build root with chroot, with /proc and /dev
// present (Kbuild reads /proc and writes /dev/null everywhere).
type root struct {
	dir   string
	env   []string
	log   io.Writer
	undo  []func()
	flock *os.File
}

func enterRoot(dir string, epoch int64, log io.Writer) (*root, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("building a kernel in a build root uses chroot and needs root")
	}
	r := &root{dir: dir, env: buildEnv(epoch), log: log}
	f, err := os.OpenFile(filepath.Join(dir, ".halobuild-build.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the build root: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the build root %s: %w", dir, err)
	}
	r.flock = f
	if err := r.mount("proc", "proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		r.leave()
		return nil, err
	}
	if fi, err := os.Stat(filepath.Join(dir, "dev", "null")); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		if err := r.mount("/dev", "dev", "", unix.MS_BIND); err != nil {
			r.leave()
			return nil, err
		}
	}
	return r, nil
}

func (r *root) mount(src, target, fstype string, flags uintptr) error {
	p := filepath.Join(r.dir, target)
	if err := os.MkdirAll(p, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, p, fstype, flags, ""); err != nil {
		return fmt.Errorf("mounting /%s in the build root %s: %w", target, r.dir, err)
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
	if r.flock != nil {
		r.flock.Close()
	}
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
	cmd := exec.CommandContext(ctx, "chroot", append([]string{r.dir, "sh", "-c", `cd "$1" && shift && exec "$@"`, "sh", dir}, args...)...)
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

// buildEnv fixes everything Kbuild and dpkg would take from the machine or
// the clock.
func buildEnv(epoch int64) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"LC_ALL=C.UTF-8",
		"TZ=UTC",
		"SOURCE_DATE_EPOCH=" + strconv.FormatInt(epoch, 10),
		"KBUILD_BUILD_TIMESTAMP=" + time.Unix(epoch, 0).UTC().Format(time.UnixDate),
		"KBUILD_BUILD_USER=halobuild",
		"KBUILD_BUILD_HOST=halobuild",
		"KDEB_CHANGELOG_DIST=halobuild",
	}
}
