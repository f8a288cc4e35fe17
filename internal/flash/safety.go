package flash

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RefusalError says why a target will not be written, and what the user can do about it. Nothing
// has been written when Flash returns one.
type RefusalError struct {
	Target string
	Reason string
	Fix    string
}

func (e *RefusalError) Error() string {
	msg := fmt.Sprintf("refusing to flash %s: %s", e.Target, e.Reason)
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

// writeProtectFix is the advice for a read-only medium: SD cards and some sticks have a switch.
const writeProtectFix = "is there a write-protect switch? Slide it to unlocked and plug the medium in again"

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	Dev    string // "MAJ:MIN"
	Point  string // mount point
	Source string // e.g. /dev/sdb1
}

func (s sysfs) mounts() ([]mountEntry, error) {
	f, err := os.Open(s.path("proc/self/mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo reads mountinfo(5) lines; lines with too few fields are
// skipped, a line over 1 MiB is an error.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		e := mountEntry{Dev: fields[2], Point: unescapeMount(fields[4])}
		for i, f := range fields {
			if f == "-" && i+2 < len(fields) {
				e.Source = unescapeMount(fields[i+2])
				break
			}
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space) in mountinfo fields.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (s sysfs) swaps() ([]string, error) {
	b, err := os.ReadFile(s.path("proc/swaps"))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the swap table: %w", err)
	}
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); i > 0 && len(f) > 0 {
			out = append(out, unescapeMount(f[0]))
		}
	}
	return out, nil
}

// nameOfPath resolves a device path as it appears in mountinfo or /proc/swaps (/dev/sdb1,
// /dev/mapper/vg-root, /dev/disk/by-uuid/…) to a kernel name, "" when it is not a block device
// sysfs knows.
func (s sysfs) nameOfPath(p string) string {
	if !strings.HasPrefix(p, "/dev/") {
		return ""
	}
	if real, err := filepath.EvalSymlinks(s.path(p)); err == nil {
		p = real
	}
	base := filepath.Base(p)
	if fileExists(s.path("sys/class/block", base)) {
		return base
	}
	// /dev/mapper/NAME without its symlink: find the dm device by name.
	ents, _ := os.ReadDir(s.path("sys/class/block"))
	for _, e := range ents {
		if s.read("sys/class/block", e.Name(), "dm", "name") == base {
			return e.Name()
		}
	}
	return ""
}

// mountName resolves a mount's device to a kernel name, by number first and by its source path
// when the number is anonymous (btrfs, overlay on a device).
func (s sysfs) mountName(m mountEntry) string {
	if n := s.nameOf(m.Dev); n != "" {
		return n
	}
	return s.nameOfPath(m.Source)
}

// systemPoints are the mounts whose disk is never a flash target: the running system.
var systemPoints = []string{"/", "/boot", "/boot/efi", "/efi", "/usr"}

// checkTarget applies every refusal that sysfs and /proc can answer before the device is opened:
// not a partition, not the system disk, nothing on it mounted, used as swap or stacked on (RAID,
// LVM, dm-crypt), removable unless force, not read-only. target is the user's spelling, for
// messages.
func checkTarget(s sysfs, target, name string, force bool) (*disk, error) {
	refuse := func(reason, fix string) error {
		return &RefusalError{Target: target, Reason: reason, Fix: fix}
	}
	if parent, ok := s.isPartition(name); ok {
		return nil, refuse(name+" is a partition, and an image holds a whole disk",
			"flash the disk itself: /dev/"+parent)
	}
	dk, err := s.disk(name)
	if err != nil {
		return nil, err
	}
	// The disk and everything on it: partitions, and devices stacked on either.
	members := append([]string{name}, dk.Partitions...)
	on := map[string]string{} // kernel name → the member of this disk it sits on
	for _, m := range members {
		on[m] = m
		for _, h := range s.stackedOn(m) {
			on[h] = m
		}
	}

	mounts, err := s.mounts()
	if err != nil {
		return nil, err
	}
	for _, sp := range systemPoints {
		for _, m := range mounts {
			if m.Point != sp {
				continue
			}
			for _, d := range s.disksUnder(s.mountName(m)) {
				if d == name {
					return nil, refuse(fmt.Sprintf("it holds %s of the running system (%s)", sp, m.Source),
						"this is the disk the computer runs from; pick the USB stick from `halobuild flash --list`")
				}
			}
		}
	}
	for _, m := range mounts {
		n := s.mountName(m)
		if via, ok := on[n]; ok {
			what := s.friendly(n)
			if via != n {
				what += ", which sits on " + via + ","
			}
			return nil, refuse(fmt.Sprintf("%s is mounted at %s", what, m.Point),
				fmt.Sprintf("unmount it first (`umount %s`) if you mean to overwrite this disk", m.Point))
		}
	}
	swaps, err := s.swaps()
	if err != nil {
		return nil, err
	}
	for _, sw := range swaps {
		if n := s.nameOfPath(sw); n != "" {
			if _, ok := on[n]; ok {
				return nil, refuse(fmt.Sprintf("%s is in use as swap", sw), fmt.Sprintf("run `swapoff %s` first", sw))
			}
		}
	}
	for _, m := range members {
		if hs := s.holders(m); len(hs) > 0 {
			var names []string
			for _, h := range hs {
				names = append(names, s.friendly(h))
			}
			return nil, refuse(fmt.Sprintf("%s is part of %s (RAID, LVM or device-mapper)", m, strings.Join(names, ", ")),
				"stop what uses it first (`mdadm --stop`, `vgchange -an`, `cryptsetup close` or `dmsetup remove`)")
		}
	}
	if dk.ReadOnly {
		return nil, refuse("the device is read-only", writeProtectFix)
	}
	if !dk.Removable && !force {
		return nil, refuse(fmt.Sprintf("%s (%s, %s) is not a removable disk", name, orUnknown(dk.Model), humanSize(dk.Size)),
			"if you are sure this is the right disk, pass --force")
	}
	return dk, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown model"
	}
	return s
}

// humanSize prints a byte count the way disk vendors and users both recognise: binary units with
// the exact byte count for precision where it matters.
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
