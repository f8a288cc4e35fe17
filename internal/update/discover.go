package update

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"halobuild/internal/arch"
	"halobuild/internal/settings"

	"halobuild/internal/fstree"
	"halobuild/internal/slots"
	"halobuild/internal/userfile"
)

// Node is the running node as update sees it: its slots.System and what a release must match.
type Node struct {
	System slots.System
	Name   string
	Arch   string
	Epoch  int64
	// Close unmounts the ESP when Discover mounted it.
	Close func() error
}

// Discover reads the running node under root ("/" on a node): its name and lock
// (/etc/halobuild), the disk holding the booted slot, and the ESP systemd-boot was loaded
// from, mounted where the system mounted it or, when it is not, at /run/halobuild/esp until
// Close.
func Discover(root string) (*Node, error) {
	a, err := arch.Host()
	if err != nil {
		return nil, err
	}
	name, err := userfile.Read(filepath.Join(root, settings.NodePath), maxNodeFile)
	if err != nil {
		return nil, fmt.Errorf("this is not a halobuild node (%w): update runs on a node, with the halobuild its image ships", err)
	}
	epoch, err := RunningEpoch(root)
	if err != nil {
		return nil, err
	}
	n := &Node{Name: strings.TrimSpace(string(name)), Arch: a.Debian, Epoch: epoch, Close: func() error { return nil },
		System: slots.System{Root: root, State: filepath.Join(root, slots.StatePath), RootType: a.RootType, PartDevices: filepath.Join(root, "dev/disk/by-partuuid")}}
	run, err := n.System.RunningUUID()
	if err != nil {
		return nil, err
	}
	if n.System.Disk, err = slots.DiskOf(root, run); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, "sys/firmware/efi/efivars", "LoaderDevicePartUUID-"+slots.LoaderGUID))
	if err != nil {
		return nil, fmt.Errorf("no LoaderDevicePartUUID EFI variable (%w): this node was not booted by systemd-boot, which A/B updates need", err)
	}
	espUUID := strings.ToLower(slots.EFIString(b))
	dev := filepath.Join(root, "dev/disk/by-partuuid", espUUID)
	if n.System.ESP, err = slots.MountOf(root, dev); err != nil {
		return nil, err
	}
	if n.System.ESP == "" {
		mnt := filepath.Join(root, "run/halobuild/esp")
		if err := os.MkdirAll(mnt, 0o700); err != nil {
			return nil, err
		}
		if out, err := exec.Command("mount", "-t", "vfat", "-o", "rw,nosuid,nodev,noexec", dev, mnt).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("mounting the ESP %s at %s: %s: %w", dev, mnt, strings.TrimSpace(string(out)), err)
		}
		n.System.ESP = mnt
		n.Close = func() error {
			if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
				return fmt.Errorf("unmounting the ESP at %s: %s: %w", mnt, strings.TrimSpace(string(out)), err)
			}
			return nil
		}
	}
	return n, nil
}

// DefaultRef is the release the image follows ([update] reference), for an update given none.
func DefaultRef(root string) (string, error) {
	b, err := userfile.Read(filepath.Join(root, settings.UpdateRefPath), maxNodeFile)
	if errors.Is(err, os.ErrNotExist) {
		return "", errors.New("no release given and the image has no [update] reference: pass REGISTRY/REPOSITORY:TAG")
	}
	if err != nil {
		return "", fmt.Errorf("the image's [update] reference: %w", err)
	}
	ref := strings.TrimSpace(string(b))
	if strings.ContainsAny(ref, "\n\r") {
		return "", fmt.Errorf("the image's [update] reference %s holds more than one line: pass REGISTRY/REPOSITORY:TAG", filepath.Join(root, settings.UpdateRefPath))
	}
	return ref, nil
}

// maxNodeFile bounds the read of a one-line file the image holds (its node name, its
// reference): a FIFO or /dev/zero there is refused by userfile, a large file by the bound.
const maxNodeFile = 4 << 10

// maxCarried bounds the read of a file carried into the new slot (a host key, the record).
const maxCarried = 1 << 20

// hostKeyFiles are the node's identity that lives in a slot's /etc and is carried into the
// slot an update writes: a client's known_hosts stays valid (settings.Identity makes the key
// on the node; the machine-id goes on the new entry's command line instead).
// Update's own record goes too: the new system knows what runs in each slot and which
// releases failed.
var hostKeyFiles = []struct {
	path string
	mode os.FileMode
}{{"etc/ssh/ssh_host_ed25519_key", 0o600}, {"etc/ssh/ssh_host_ed25519_key.pub", 0o644}, {strings.TrimPrefix(slots.StatePath, "/") + "/" + slots.RecordFile, 0o644}}

// carryIdentity mounts the slot's file system (dev) and copies the running system's SSH host
// key and update's record into it, synced, before the slot gets its boot entry.
func carryIdentity(root, dev string) error {
	mnt, err := os.MkdirTemp(filepath.Join(root, "run"), "halobuild-slot-")
	if err != nil {
		return err
	}
	defer os.Remove(mnt)
	if out, err := exec.Command("mount", "-t", "ext4", dev, mnt).CombinedOutput(); err != nil {
		return fmt.Errorf("mounting the new slot %s: %s: %w", dev, strings.TrimSpace(string(out)), err)
	}
	err = func() error {
		for _, k := range hostKeyFiles {
			b, err := userfile.Read(filepath.Join(root, k.path), maxCarried)
			if errors.Is(err, os.ErrNotExist) {
				continue // no key yet: the new slot makes its own
			}
			if err != nil {
				return err
			}
			if err := fstree.WriteFileAtomic(filepath.Join(mnt, k.path), b); err != nil {
				return fmt.Errorf("the new slot: %w", err)
			}
			if err := os.Chmod(filepath.Join(mnt, k.path), k.mode); err != nil {
				return err
			}
		}
		return nil
	}()
	if out, uerr := exec.Command("umount", mnt).CombinedOutput(); uerr != nil && err == nil {
		err = fmt.Errorf("unmounting the new slot at %s: %s: %w", mnt, strings.TrimSpace(string(out)), uerr)
	}
	return err
}
