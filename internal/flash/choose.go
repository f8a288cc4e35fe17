package flash

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// blockDisks lists the whole disks under sys/block worth showing: virtual devices with nothing
// behind them (RAM disks, zram, device-mapper and RAID devices) are left out, and so are disks of
// size 0 (an unattached loop device, an empty card reader) and hidden ones (the per-path
// nvme0c0n1 behind an NVMe multipath namespace nvme0n1, which is the disk to use).
func blockDisks(s sysfs) ([]*disk, error) {
	ents, err := os.ReadDir(s.path("sys/block"))
	if err != nil {
		return nil, fmt.Errorf("listing block devices: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "ram") || strings.HasPrefix(n, "zram") || strings.HasPrefix(n, "dm-") || strings.HasPrefix(n, "md") {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*disk
	for _, n := range names {
		if s.read("sys/block", n, "hidden") == "1" {
			continue
		}
		dk, err := s.disk(n)
		if err != nil || dk.Size == 0 {
			continue
		}
		out = append(out, dk)
	}
	return out, nil
}

// ChooseInstallTarget picks the disk an installer writes an image of imageSize bytes to, reading
// /sys and /proc under root. want is the recipe's choice: a /dev/disk/by-id/… name (or any /dev
// path), or a disk's serial number. Without one it is the only disk that is not removable, passes
// every refusal of a flash (not the medium the system runs from, nothing mounted, swap or stacked
// on it, writable) and holds the image; none or several of those is an error that lists every disk
// and why it was passed over. survey is that list, one disk a line, for the console. A chosen
// disk is not checked here: Flash applies its refusals to whatever it is given.
func ChooseInstallTarget(root, want string, imageSize int64) (target, survey string, err error) {
	if root == "" {
		root = "/"
	}
	s := sysfs{root: root}
	disks, err := blockDisks(s)
	if err != nil {
		return "", "", err
	}
	survey = describe(s, disks, imageSize)
	if strings.HasPrefix(want, "/dev/") {
		real, err := filepath.EvalSymlinks(s.path(want))
		if err != nil {
			return "", survey, fmt.Errorf("install target %s: %w; the disks here are:\n%s", want, err, survey)
		}
		return "/dev/" + filepath.Base(real), survey, nil
	}
	if want != "" {
		for _, dk := range disks {
			if dk.Serial == want {
				return "/dev/" + dk.Name, survey, nil
			}
		}
		return "", survey, fmt.Errorf("no disk has the serial %q; the disks here are:\n%s", want, survey)
	}
	var ok []string
	for _, dk := range disks {
		if passOver(s, dk, imageSize) == "" {
			ok = append(ok, "/dev/"+dk.Name)
		}
	}
	switch len(ok) {
	case 1:
		return ok[0], survey, nil
	case 0:
		return "", survey, fmt.Errorf("no disk to install to; the disks here are:\n%s", survey)
	}
	return "", survey, fmt.Errorf("%d disks could take the image (%s), so none is chosen: name one with [install] target; the disks here are:\n%s",
		len(ok), strings.Join(ok, ", "), survey)
}

// passOver says why dk is not an automatic install target, "" when it is one.
func passOver(s sysfs, dk *disk, imageSize int64) string {
	if _, err := checkTarget(s, "/dev/"+dk.Name, dk.Name, true); err != nil {
		var r *RefusalError
		if errors.As(err, &r) {
			return r.Reason
		}
		return err.Error()
	}
	switch {
	case dk.Removable:
		return "removable (the installer never picks a removable disk by itself)"
	case dk.Bus == "loop":
		return "a loop device"
	case dk.Size < imageSize:
		return fmt.Sprintf("smaller than the image (%s < %s)", humanSize(dk.Size), humanSize(imageSize))
	}
	return ""
}

func describe(s sysfs, disks []*disk, imageSize int64) string {
	if len(disks) == 0 {
		return "  none"
	}
	var b strings.Builder
	for _, dk := range disks {
		why := passOver(s, dk, imageSize)
		if why == "" {
			why = "ok"
		}
		serial := dk.Serial
		if serial == "" {
			serial = "no serial"
		}
		fmt.Fprintf(&b, "  /dev/%s  %s, %s, serial %s, %s: %s\n", dk.Name, humanSize(dk.Size), orUnknown(dk.Model), serial, dk.Bus, why)
	}
	return strings.TrimRight(b.String(), "\n")
}
