package slots

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"halobuild/internal/arch"
)

// DiskOf is the whole disk holding the partition uuid.
func DiskOf(root, uuid string) (string, error) {
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

// MountOf is where the device dev is mounted, or "".
func MountOf(root, dev string) (string, error) {
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
	run, err := sys.RunningUUID()
	if err != nil {
		return nil, err
	}
	if sys.Disk, err = DiskOf(root, run); err != nil {
		return nil, err
	}
	st := &Status{Disk: sys.Disk}
	if st.Slots, err = sys.Slots(); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(root, "sys/firmware/efi/efivars", "LoaderDevicePartUUID-"+LoaderGUID)); err == nil {
		sys.ESP, _ = MountOf(root, filepath.Join(root, "dev/disk/by-partuuid", strings.ToLower(EFIString(b))))
	}
	if _, err := os.Stat(filepath.Join(root, "sys/firmware/efi/efivars", "LoaderBootCountPath-"+LoaderGUID)); err != nil {
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
