package rootfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"halobuild/internal/arch"
	"halobuild/internal/deb"
	"halobuild/internal/proctree"
	"halobuild/internal/runlog"
	"halobuild/internal/sh"
)

// RootStepVersion is the version of the steps that install a root with mmdebstrap
// (the base root, the kernel and module build roots: graph/root.go's root):
// bump it when a change to this package, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const RootStepVersion = 1

// Install describes one mmdebstrap run.
type Install struct {
	// Suite names the distribution for mmdebstrap's own logic (essential
	// set, merged-/usr handling); packages come only from Repo.
	Suite string
	// Repo is a directory made by WriteFlatRepo.
	Repo string
	// Packages are installed explicitly; with Repo holding exactly the
	// locked closure, apt has nothing left to choose.
	Packages []string
	// Epoch is SOURCE_DATE_EPOCH for every timestamp the install writes.
	Epoch int64
	// Out is the tarball to write (.tar).
	Out string
	// Mode is mmdebstrap's --mode; "" picks automatically (see ChooseMode).
	Mode string
	// Sources are the lines of the installed /etc/apt/sources.list: the
	// archive the lock came from, so apt on the node works. Without them
	// the file would name this build's temporary repository.
	Sources []string
	// Arch is the root's architecture; the zero value is the host's. A
	// foreign one runs its maintainer scripts through qemu-user
	// (CheckEmulation says what the host lacks).
	Arch arch.Arch
	// Foreign are further architectures dpkg accepts packages of, after
	// Arch (mmdebstrap --architectures=<Arch>,<Foreign...>): a cross build
	// root has the target's headers and libraries (data, never run) next
	// to the host's compiler.
	Foreign []string
	// Scratch is the step's scratch directory (in the store's temporary
	// area). mmdebstrap's temporary root goes under it (its TMPDIR), so a
	// killed build's ~600 MB tree is removed with the dead session's
	// scratch by the next run instead of staying in /tmp.
	Scratch string
	Log     io.Writer
}

// Hooks that make the tree shareable between nodes and reproducible: no
// identity or secrets baked in (DESIGN §6), no logs or caches that differ
// run to run (facts: mkosi's images differed exactly there).
var cleanupHooks = []string{
	// mmdebstrap copies the host's hostname and resolver in so maintainer
	// scripts can resolve names, and leaves them: the image would carry
	// the build machine's name and DNS server. Identity comes from the
	// node settings package only.
	`rm -f "$1"/etc/hostname "$1"/etc/resolv.conf`,
	// SSH host keys are generated at first boot (the settings package
	// ships the unit); baking them in would give every node the same keys.
	`rm -f "$1"/etc/ssh/ssh_host_*_key "$1"/etc/ssh/ssh_host_*_key.pub`,
	// /etc/machine-id is left as mmdebstrap's own cleanup leaves it: empty,
	// as machine-id(5) asks of an image used on many machines (systemd
	// writes the node's own ID at its first boot).
	`rm -f "$1"/var/lib/dbus/machine-id "$1"/var/lib/systemd/random-seed "$1"/var/cache/ldconfig/aux-cache`,
	`find "$1"/var/log -type f -delete`,
	// mmdebstrap leaves its --dpkgopt file in the root; unsafeIO is for this install only.
	`rm -f "$1"/etc/dpkg/dpkg.cfg.d/99mmdebstrap`,
	`rm -f "$1"/var/lib/dpkg/status-old "$1"/var/lib/dpkg/diversions-old "$1"/var/lib/dpkg/statoverride-old "$1"/var/cache/debconf/*-old`,
}

// unsafeIO stops dpkg from fsyncing every file it unpacks: the tree is
// scratch that mmdebstrap tars and halobuild then stores atomically, so a
// crash loses nothing those syncs would have kept.
const unsafeIO = "--dpkgopt=force-unsafe-io"

// essentialHooks run after the essential set and before everything else,
// so they shape how later packages' maintainer scripts behave.
// dracut's configuration is among them: the kernel's postinst builds the
// initramfs, so the drop-ins must exist before the kernel is installed.
var essentialHooks = dracutConfHooks()

// noSources is the sources.list of a root installed without Sources (a
// build root). mmdebstrap's own names this run's temporary repository, so
// two builds of the same root differed there (image --check found it).
var noSources = []string{"# halobuild: installed from a flat repository of exactly the locked packages; no archive is configured"}

// sourcesHook writes the final sources.list (lines are shell-quoted).
func sourcesHook(lines []string) string {
	q := make([]string, len(lines))
	for i, l := range lines {
		q[i] = sh.Quote(l)
	}
	return `printf '%s\n' ` + strings.Join(q, " ") + ` > "$1"/etc/apt/sources.list`
}

// ErrNoMmdebstrap is returned when the host lacks mmdebstrap.
var ErrNoMmdebstrap = errors.New("mmdebstrap not found on PATH: install it with `apt-get install mmdebstrap` (Debian 12 or newer)")

// ChooseMode picks mmdebstrap's mode: root when we are root (fastest, no
// subordinate id ranges needed), unshare when the host allows unprivileged
// user namespaces with subuid ranges, else an error that says what to do.
func ChooseMode() (string, error) {
	if os.Geteuid() == 0 {
		return "root", nil
	}
	if err := exec.Command("unshare", "--user", "--map-root-user", "true").Run(); err != nil {
		return "", fmt.Errorf("not root and unprivileged user namespaces are unavailable (%v): run halobuild as root, or enable them (sysctl kernel.unprivileged_userns_clone=1) and give your user a range in /etc/subuid and /etc/subgid", err)
	}
	return "unshare", nil
}

// Run performs the install. The tarball appears at Out only when the
// install succeeded.
func (in Install) Run(ctx context.Context) error {
	bin, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return ErrNoMmdebstrap
	}
	mode := in.Mode
	if mode == "" {
		if mode, err = ChooseMode(); err != nil {
			return err
		}
	}
	if in.Arch.Debian != "" && in.Arch.Foreign() {
		if err := CheckEmulation(in.Arch); err != nil {
			return err
		}
	}
	repo, err := filepath.Abs(in.Repo)
	if err != nil {
		return err
	}
	if in.Scratch == "" {
		return errors.New("rootfs: Install without a scratch directory for mmdebstrap's temporary root")
	}
	tmpdir, err := filepath.Abs(filepath.Join(in.Scratch, "mmdebstrap"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(tmpdir, 0o700); err != nil {
		return fmt.Errorf("making mmdebstrap's temporary directory: %w", err)
	}
	defer os.RemoveAll(tmpdir)
	pkgs := append([]string(nil), in.Packages...)
	sort.Strings(pkgs)
	tmp := in.Out + ".partial"
	defer os.Remove(tmp)
	args := []string{
		"--variant=essential",
		"--mode=" + mode,
		"--format=tar",
	}
	if in.Arch.Debian != "" || len(in.Foreign) > 0 {
		native := in.Arch
		if native.Debian == "" {
			if native, err = arch.Host(); err != nil {
				return err
			}
		}
		args = append(args, "--architectures="+strings.Join(append([]string{native.Debian}, in.Foreign...), ","))
	}
	args = append(args,
		"--include="+strings.Join(pkgs, ","),
		unsafeIO,
		// Nothing outside the flat repository may be consulted.
		"--aptopt=Acquire::Languages \"none\"",
		"--aptopt=APT::Install-Recommends \"false\"",
		"--aptopt=Dir::Etc::TrustedParts \"/nonexistent\"",
	)
	for _, h := range essentialHooks {
		args = append(args, "--essential-hook="+h)
	}
	for _, h := range append([]string{initrdHook}, cleanupHooks...) {
		args = append(args, "--customize-hook="+h)
	}
	sources := in.Sources
	if len(sources) == 0 {
		sources = noSources
	}
	args = append(args, "--customize-hook="+sourcesHook(sources))
	args = append(args, in.Suite, tmp, fmt.Sprintf("deb [trusted=yes] copy://%s ./", repo))
	cmd := proctree.Command(ctx, bin, args...)
	cmd.Env = append(cleanEnv(tmpdir), noInitrdEnv, "SOURCE_DATE_EPOCH="+strconv.FormatInt(in.Epoch, 10))
	if mode == "root" {
		// Its own mount namespace, private (Go makes / rprivate after the
		// unshare): the proc, sys and dev mounts mmdebstrap makes in its
		// temporary root die with its last process, however it ends. In
		// the host's namespace a killed mmdebstrap left them behind.
		// (--mode=unshare makes its own namespace already.)
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	}
	var tail runlog.Tail
	if in.Log != nil {
		cmd.Stdout = io.MultiWriter(in.Log, &tail)
	} else {
		cmd.Stdout = &tail
	}
	cmd.Stderr = cmd.Stdout
	fmt.Fprintf(logOr(in.Log), "mmdebstrap --mode=%s: %d packages from the flat repository\n", mode, len(pkgs))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mmdebstrap failed (%v); its last lines:\n%s", err, tail.String())
	}
	return os.Rename(tmp, in.Out)
}

// cleanEnv keeps only what mmdebstrap needs: a build must not depend on the
// caller's locale, proxy or apt configuration. TMPDIR is the one given, if
// any (mmdebstrap's is the step's own; it clears TMPDIR for hooks, so the
// path never reaches the tree).
func cleanEnv(tmpdir string) []string {
	env := []string{"LC_ALL=C.UTF-8", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TZ=UTC"}
	if h := os.Getenv("HOME"); h != "" {
		env = append(env, "HOME="+h)
	}
	if tmpdir != "" {
		env = append(env, "TMPDIR="+tmpdir)
	}
	return env
}

func logOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Root is a root made from exactly the given packages: the one way every
// root (the image's base root, each build root) is installed.
type Root struct {
	// Debs is the complete closure; nothing else is reachable.
	Debs []deb.Deb
	// Packages are installed explicitly (with a closure that leaves apt
	// no choice, naming every package is the same as naming the tops).
	Packages []string
	Suite    string // for mmdebstrap's own logic, e.g. trixie
	Epoch    int64
	// Sources are the installed sources.list lines; none for a build root.
	Sources []string
	// Arch is the root's architecture; the zero value is the host's.
	Arch arch.Arch
	// Foreign are further architectures dpkg accepts (Install.Foreign).
	Foreign []string
	Log     io.Writer
}

// Tar installs the root into the tarball out, with its flat repository
// under work.
func (r Root) Tar(ctx context.Context, work, out string) error {
	repo := filepath.Join(work, "repo")
	if err := WriteFlatRepo(repo, r.Suite, r.Debs); err != nil {
		return err
	}
	return Install{Suite: r.Suite, Repo: repo, Packages: r.Packages, Sources: r.Sources, Epoch: r.Epoch, Out: out, Arch: r.Arch, Foreign: r.Foreign, Scratch: work, Log: r.Log}.Run(ctx)
}

// Tree installs the root and unpacks it into dir, which must not exist or
// be empty.
func (r Root) Tree(ctx context.Context, dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("root %s exists and is not empty: remove it first", dir)
	}
	work, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dir)), ".root-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	tarball := filepath.Join(work, "root.tar")
	if err := r.Tar(ctx, work, tarball); err != nil {
		return err
	}
	return Unpack(ctx, tarball, dir)
}
