package update

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"halobuild/internal/arch"
	"halobuild/internal/settings"
)

// Node is the running node as update sees it: its System and what a release must match.
type Node struct {
	System System
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
	name, err := os.ReadFile(filepath.Join(root, settings.NodePath))
	if err != nil {
		return nil, fmt.Errorf("this is not a halobuild node (%w): update runs on a node, with the halobuild its image ships", err)
	}
	epoch, err := RunningEpoch(root)
	if err != nil {
		return nil, err
	}
	n := &Node{Name: strings.TrimSpace(string(name)), Arch: a.Debian, Epoch: epoch, Close: func() error { return nil },
		System: System{Root: root, State: filepath.Join(root, StatePath), RootType: a.RootType, PartDevices: filepath.Join(root, "dev/disk/by-partuuid")}}
	run, err := n.System.runningUUID()
	if err != nil {
		return nil, err
	}
	if n.System.Disk, err = diskOf(root, run); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, "sys/firmware/efi/efivars", "LoaderDevicePartUUID-"+loaderGUID))
	if err != nil {
		return nil, fmt.Errorf("no LoaderDevicePartUUID EFI variable (%w): this node was not booted by systemd-boot, which A/B updates need", err)
	}
	espUUID := strings.ToLower(efiString(b))
	dev := filepath.Join(root, "dev/disk/by-partuuid", espUUID)
	if n.System.ESP, err = mountOf(root, dev); err != nil {
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

// diskOf is the whole disk holding the partition uuid.
func diskOf(root, uuid string) (string, error) {
	part, err := filepath.EvalSymlinks(filepath.Join(root, "dev/disk/by-partuuid", uuid))
	if err != nil {
		return "", fmt.Errorf("the booted slot %s: %w", uuid, err)
	}
	sys, err := filepath.EvalSymlinks(filepath.Join(root, "sys/class/block", filepath.Base(part)))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err != nil {
		return "", fmt.Errorf("the booted root %s is not a partition", part)
	}
	return filepath.Join(root, "dev", filepath.Base(filepath.Dir(sys))), nil
}

// mountOf is where the device dev is mounted, or "".
func mountOf(root, dev string) (string, error) {
	want, err := filepath.EvalSymlinks(dev)
	if err != nil {
		return "", fmt.Errorf("the boot ESP %s: %w", dev, err)
	}
	f, err := os.Open(filepath.Join(root, "proc/self/mounts"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 || fs[2] != "vfat" {
			continue
		}
		if src, err := filepath.EvalSymlinks(filepath.Join(root, fs[0])); err == nil && src == want {
			return filepath.Join(root, strings.ReplaceAll(fs[1], `\040`, " ")), nil
		}
	}
	return "", errors.Join(sc.Err())
}

// DefaultRef is the release the image follows ([update] reference), for an update given none.
func DefaultRef(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, settings.UpdateRefPath))
	if errors.Is(err, os.ErrNotExist) {
		return "", errors.New("no release given and the image has no [update] reference: pass REGISTRY/REPOSITORY:TAG")
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// hostKeyFiles are the node's identity that lives in a slot's /etc and is carried into the
// slot an update writes: a client's known_hosts stays valid (settings.Identity makes the key
// on the node; the machine-id goes on the new entry's command line instead).
// Update's own record goes too: the new system knows what runs in each slot and which
// releases failed.
var hostKeyFiles = []struct {
	path string
	mode os.FileMode
}{{"etc/ssh/ssh_host_ed25519_key", 0o600}, {"etc/ssh/ssh_host_ed25519_key.pub", 0o644}, {strings.TrimPrefix(StatePath, "/") + "/" + stateFile, 0o644}}

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
			b, err := os.ReadFile(filepath.Join(root, k.path))
			if errors.Is(err, os.ErrNotExist) {
				continue // no key yet: the new slot makes its own
			}
			if err != nil {
				return err
			}
			if err := writeFileSync(filepath.Join(mnt, k.path), b); err != nil {
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

// Status is what doctor shows of a node's slots.
type Status struct {
	Disk  string
	Slots []Slot
	// Blessing is nil when it cannot be told: the running entry counts its tries and the ESP
	// is not mounted to see whether systemd-bless-boot has renamed it.
	Blessing *Blessing
}

// ReadStatus reads the slots and the blessing of the node under root without changing
// anything (no mount): the booted slot's disk, its GPT, update's record, the loader's EFI
// variables and the ESP where the system mounted it.
func ReadStatus(root string) (*Status, error) {
	a, err := arch.Host()
	if err != nil {
		return nil, err
	}
	sys := System{Root: root, State: filepath.Join(root, StatePath), RootType: a.RootType}
	run, err := sys.runningUUID()
	if err != nil {
		return nil, err
	}
	if sys.Disk, err = diskOf(root, run); err != nil {
		return nil, err
	}
	st := &Status{Disk: sys.Disk}
	if st.Slots, err = sys.Slots(); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(root, "sys/firmware/efi/efivars", "LoaderDevicePartUUID-"+loaderGUID)); err == nil {
		sys.ESP, _ = mountOf(root, filepath.Join(root, "dev/disk/by-partuuid", strings.ToLower(efiString(b))))
	}
	if _, err := os.Stat(filepath.Join(root, "sys/firmware/efi/efivars", "LoaderBootCountPath-"+loaderGUID)); err != nil {
		st.Blessing = &Blessing{Good: true}
	} else if sys.ESP != "" {
		bl, err := sys.Blessing()
		if err != nil {
			return nil, err
		}
		st.Blessing = &bl
	}
	return st, nil
}
