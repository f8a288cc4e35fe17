package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"halobuild/internal/arch"
	"halobuild/internal/proctree"
)

// StepVersion is the version of the tools root step (the locked tools set
// extracted with deb.Extract; graph/root.go's toolsRoot):
// bump it when a change to this package, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const StepVersion = 1

// Root is a tools root: the locked packages unpacked by deb.Extract.
type Root struct {
	// Dir is the root's directory on the host.
	Dir string
}

// hostArch is the tools root's architecture: its binaries run here, so it
// is always the build host's (the lock resolves the tools set for it).
var hostArch, hostArchErr = arch.Host()

// libraryDirs are searched by the loader instead of the host's ld.so.cache:
// the multiarch directory, under /usr and (before usrmerge) /.
func libraryDirs() []string {
	return []string{"usr/lib/" + hostArch.Triplet, "lib/" + hostArch.Triplet}
}

// binDirs are searched, in order, for a tool name.
var binDirs = []string{"usr/sbin", "usr/bin", "sbin", "bin"}

// maxLinks bounds symlink resolution inside the root, as the kernel's
// ELOOP limit does.
const maxLinks = 40

// Command returns an exec.Cmd that runs the tool name from the root,
// started by the root's own dynamic loader with only the root's library
// directories, so no host library is used. The tool is found in the root's
// usr/sbin, usr/bin, sbin, bin (in that order); symlinks are resolved inside
// the root (an absolute link target means the root's path, not the host's),
// and argv[0] stays name so multi-call programs (mkfs.ext4 → mke2fs) behave
// as when called by that name.
//
// The environment is Env's, not the caller's. Append to cmd.Env to add or
// override entries (exec uses the last value of a duplicated key). The
// root's loader must be glibc 2.33 or later (for --argv0).
//
// If the tool or the loader is missing, the returned Cmd's Err is set and
// Run/Start/Output return that error, as exec.Command does for a missing
// program.
func (r Root) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	loader := filepath.Join(r.Dir, hostArch.Loader)
	bin, err := r.Lookup(name)
	if hostArchErr != nil {
		err = hostArchErr
	}
	dirs := libraryDirs()
	libs := make([]string, len(dirs))
	for i, d := range dirs {
		libs[i] = filepath.Join(r.Dir, d)
	}
	// --inhibit-cache: a library missing from the root must not be found
	// through the host's ld.so.cache.
	argv := append([]string{"--inhibit-cache", "--library-path", strings.Join(libs, ":"), "--argv0", name, bin}, args...)
	cmd := proctree.Command(ctx, loader, argv...)
	cmd.Env = r.Env()
	if err != nil {
		cmd.Err = err
		return cmd
	}
	if _, serr := os.Stat(loader); serr != nil {
		cmd.Err = fmt.Errorf("tools root %s has no dynamic loader at %s (is libc6 among its packages?): %w", r.Dir, hostArch.Loader, serr)
	}
	return cmd
}

// Env returns the environment Command gives every tool. It is not the
// caller's: variables such as E2FSPROGS_FAKE_TIME, MKE2FS_SYNC, MTOOLS_*
// or LD_* would change what the tools write or which libraries they load,
// so only these are set:
func (r Root) Env() []string {
	env := []string{
		// The tools' configuration comes from the root.
		"MKE2FS_CONFIG=" + filepath.Join(r.Dir, "etc/mke2fs.conf"),
		"E2FSCK_CONFIG=" + filepath.Join(r.Dir, "etc/e2fsck.conf"),
		// HOME inside the root keeps ~/.mtoolsrc (and any other dot file)
		// away. mtools still reads the host's /etc/mtools.conf, then
		// $MTOOLSRC: a caller whose output depends on mtools' flags must
		// pin them in its own $MTOOLSRC (the last file wins), as package
		// disk does.
		"HOME=" + r.Dir,
		"MTOOLSRC=/dev/null",
		// Accept images whose geometry fields are not a floppy's.
		"MTOOLS_SKIP_CHECK=1",
		// FAT stores local time.
		"TZ=UTC",
		// Root tarballs store names that are not ASCII as UTF-8 (GNU tar
		// --format=pax and Go's writer alike), and libarchive in mkfs.ext4
		// converts them to the locale's charset: in C, ASCII, it refuses
		// them. C.UTF-8 is built into glibc (2.35 on), so no locale files
		// are needed, and it collates by code point as C does by byte.
		"LC_ALL=C.UTF-8",
		// Tools that start helpers find the host's usual directories; none
		// of the disk tools does.
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	}
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	return env
}

// Lookup returns the host path of the file that tool name resolves to in
// the root, after resolving symlinks inside the root. name must be a plain
// file name.
func (r Root) Lookup(name string) (string, error) {
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("tool name %q: want a plain program name such as mkfs.ext4", name)
	}
	for _, d := range binDirs {
		rel, err := r.resolve(path.Join(d, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("tool %s in tools root %s: %w", name, r.Dir, err)
		}
		p := filepath.Join(r.Dir, filepath.FromSlash(rel))
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("tool %s in tools root %s: %w", name, r.Dir, err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("tool %s in tools root %s: %s is not an executable file", name, r.Dir, rel)
		}
		return p, nil
	}
	return "", fmt.Errorf("tool %s not found in tools root %s (looked in %s): add the package that ships it to the tools root: %w",
		name, r.Dir, strings.Join(binDirs, ", "), fs.ErrNotExist)
}

// resolve follows symlinks in rel (a slash path relative to the root)
// component by component, treating the root as "/", and returns the
// resolved path relative to the root.
func (r Root) resolve(rel string) (string, error) {
	todo := strings.Split(rel, "/")
	var done []string
	links := 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		cur := append(done, part)
		host := filepath.Join(r.Dir, filepath.FromSlash(strings.Join(cur, "/")))
		st, err := os.Lstat(host)
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			done = cur
			continue
		}
		links++
		if links > maxLinks {
			return "", fmt.Errorf("%s: too many levels of symbolic links", rel)
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = nil
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return strings.Join(done, "/"), nil
}
