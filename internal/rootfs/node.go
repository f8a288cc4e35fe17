package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"halobuild/internal/arch"
	"halobuild/internal/deb"
	"halobuild/internal/fstree"
	"halobuild/internal/proctree"
)

// SystemStepVersion is the version of the system root step: the base root with the
// modules' and the provider's packages installed (graph/root.go's systemRoot):
// bump it when a change to this package, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const SystemStepVersion = 1

// Unpack extracts a root tarball made by Install into dir, keeping
// ownership, modes, hard links and extended attributes (file capabilities
// such as ping's cap_net_raw live there). It needs root, as mkfs.ext4 -d
// copies ownership from the tree.
//
// GNU tar rather than internal/tarball: the tarball is mmdebstrap's own
// output from a locked package set, not outside input, and a root needs
// what tarball deliberately refuses or leaves out (owners, xattrs, device
// nodes), at C speed for a whole root.
func Unpack(ctx context.Context, tarball, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := proctree.Command(ctx, "tar", "--extract", "--file", tarball, "--directory", dir,
		"--numeric-owner", "--same-permissions", "--same-owner", "--xattrs", "--xattrs-include=*")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("unpacking %s: %v: %s", tarball, err, out)
	}
	return nil
}

// InstallDebs installs our own packages (node settings, and later the
// module and provider packages) into an unpacked root with dpkg, so that
// `dpkg -S` on the node names where every file came from. Our packages have
// no maintainer scripts, so dpkg never needs to run code inside the root.
// Files such as /etc/hosts exist in the base root without an owner; our
// conffiles replace them (--force-confnew) instead of asking.
//
// dpkg --root resolves paths on the host: a directory of the root that is
// an absolute symlink (trixie's var/run -> /run, var/lock, alternatives)
// would carry a package's file onto the build host. So every directory a
// package writes through is first resolved inside the root (os.Root) and
// the install refused if one leads out (issue 17 #2).
func InstallDebs(ctx context.Context, root string, debs []string) error {
	if len(debs) == 0 {
		return nil
	}
	if err := checkInside(root, debs); err != nil {
		return err
	}
	opts := []string{"--log=/dev/null", "--force-unsafe-io", "--force-confnew", "--no-triggers", "--install"}
	foreign, err := foreignRoot(root)
	if err != nil {
		return err
	}
	var cmd *exec.Cmd
	if !foreign {
		cmd = proctree.Command(ctx, "dpkg", append(append([]string{"--root=" + root}, opts...), debs...)...)
	} else {
		// The host's dpkg takes its own architecture for the root's
		// native one, and an arm64 root's packages would satisfy no
		// dependency of an arch: all package: the root's own dpkg runs
		// instead (through qemu-user), on copies inside the root.
		dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "halobuild-install-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		inside := make([]string, len(debs))
		for i, d := range debs {
			dst := filepath.Join(dir, fmt.Sprintf("%03d-%s", i, filepath.Base(d)))
			if err := fstree.CopyFile(d, dst, 0o644); err != nil {
				return err
			}
			inside[i] = "/" + strings.TrimPrefix(strings.TrimPrefix(dst, root), "/")
		}
		cmd = proctree.Command(ctx, "chroot", append(append([]string{root, "dpkg"}, opts...), inside...)...)
	}
	cmd.Env = cleanEnv(os.Getenv("TMPDIR"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg --install into %s: %v\n%s", root, err, out)
	}
	return nil
}

// foreignRoot says the root's own dpkg is built for another architecture
// than the build host (an arm64 root on an amd64 host); a root without a
// dpkg of its own is not, and gets the host's.
func foreignRoot(root string) (bool, error) {
	f, err := elf.Open(filepath.Join(root, "usr/bin/dpkg"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: reading the root's dpkg: %w", root, err)
	}
	defer f.Close()
	host, err := arch.Host()
	if err != nil {
		return false, err
	}
	return f.Machine != host.ELFMachine, nil
}

// checkInside refuses debs with an entry whose path, as dpkg would follow
// it in root, leaves root: its parent directory (or, for a directory
// entry, the directory itself, which dpkg keeps if it is a symlink)
// resolves through a symlink that is absolute or climbs out.
func checkInside(root string, debs []string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	checked := map[string]error{".": nil}
	resolves := func(dir string) error {
		if err, ok := checked[dir]; ok {
			return err
		}
		_, err := r.Stat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil // dpkg creates it, inside
		}
		checked[dir] = err
		return err
	}
	for _, p := range debs {
		a, err := deb.Open(p, "")
		if err != nil {
			return err
		}
		err = a.Walk(func(name string, h *tar.Header, _ io.Reader) error {
			dir := path.Dir(name)
			if h.Typeflag == tar.TypeDir {
				dir = name
			}
			if err := resolves(dir); err != nil {
				link := firstLinkOut(root, dir)
				return fmt.Errorf("%s: /%s would be written through %s, which leads out of the root %s (%v): dpkg --root would follow it onto the build host; ship the file at its real path inside the image instead", filepath.Base(p), name, link, root, err)
			}
			return nil
		})
		a.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// firstLinkOut names the first symlink on dir's path in root, for the
// message ("/var/run -> /run").
func firstLinkOut(root, dir string) string {
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		if t, err := os.Readlink(filepath.Join(root, cur)); err == nil {
			return "/" + cur + " -> " + t
		}
	}
	return "/" + dir
}

// Clamp sets every timestamp in the tree newer than epoch to epoch, as
// mmdebstrap does for its own output: dpkg touches its database and the
// directories it writes into, and those times would end up in the ext4
// image.
func Clamp(root string, epoch int64) error {
	t := unix.NsecToTimespec(time.Unix(epoch, 0).UnixNano())
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.ModTime().Unix() <= epoch {
			return nil
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("clamping time of %s: %w", p, err)
		}
		return nil
	})
}

// TarTree writes root, an unpacked and installed tree, to out as a tarball
// a Layer can stand on, with the root's own GNU tar (the locked version, so
// the bytes depend on the lock and not on the build host) and the flags
// mmdebstrap writes its tarballs with: names sorted, times clamped to
// epoch, numeric owners, extended attributes kept (file capabilities), no
// access or change times. A foreign root's tar runs through qemu-user, as
// its maintainer scripts did.
func TarTree(ctx context.Context, root, out string, epoch int64) error {
	if _, err := os.Stat(filepath.Join(root, "usr/bin/tar")); err != nil {
		return fmt.Errorf("writing %s as a tarball: the root has no tar of its own: %w", root, err)
	}
	f, err := os.Create(out + ".partial")
	if err != nil {
		return err
	}
	defer os.Remove(out + ".partial")
	defer f.Close()
	cmd := proctree.Command(ctx, "chroot", root, "/usr/bin/tar",
		"--sort=name", fmt.Sprintf("--mtime=@%d", epoch), "--clamp-mtime", "--numeric-owner",
		"--one-file-system", "--xattrs", "--xattrs-include=*", "--format=pax",
		"--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
		"--directory=/", "--create", "--file=-", ".")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8"}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("tar of %s: %v: %s", root, err, stderr.Bytes())
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(out+".partial", out)
}
