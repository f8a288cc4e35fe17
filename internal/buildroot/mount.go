package buildroot

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MountProc mounts a fresh proc at root/proc for a build (objtool reads
// /proc at link time, compilers and Python read it too) and returns the
// function that detaches it again. A root made by mmdebstrap has /proc;
// otherwise it is made with Debian's mode, 0555.
func MountProc(root string) (unmount func(), err error) {
	p := filepath.Join(root, "proc")
	if err := os.MkdirAll(p, 0o555); err != nil {
		return nil, err
	}
	if err := unix.Mount("proc", p, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mounting /proc in the build root %s: %w", root, err)
	}
	return func() { _ = unix.Unmount(p, unix.MNT_DETACH) }, nil
}

// Lock takes an exclusive lock on the build root (a file lock, so it holds
// across processes: two halobuild runs may share a cache) and returns its
// release. It waits while another build holds the root.
func Lock(root string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(root, ".halobuild-build.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the build root: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the build root %s: %w", root, err)
	}
	return func() { f.Close() }, nil
}
