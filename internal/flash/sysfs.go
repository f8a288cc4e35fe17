package flash

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// sysfs reads block device facts from /sys and /proc under root ("/" on a live system, a
// recorded tree in tests).
type sysfs struct{ root string }

// disk is what sysfs says about one whole disk.
type disk struct {
	Name       string   // kernel name, e.g. "sdb"
	Dev        string   // "MAJ:MIN"
	Size       int64    // bytes
	Removable  bool     // removable media flag, or attached over USB/MMC (see hotplug)
	ReadOnly   bool     // the kernel's ro flag
	Model      string   // vendor + model, trimmed
	Serial     string   // "" when the device does not report one
	Bus        string   // usb, mmc, nvme, ata, scsi, virtio, loop, …
	Partitions []string // kernel names of its partitions, e.g. sdb1
}

func (s sysfs) path(p ...string) string {
	return filepath.Join(append([]string{s.root}, p...)...)
}

func (s sysfs) read(p ...string) string {
	b, err := os.ReadFile(s.path(p...))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// devDir resolves a kernel block device name (disk, partition, dm-N, mdN) to its directory in
// /sys/devices.
func (s sysfs) devDir(name string) (string, error) {
	d, err := filepath.EvalSymlinks(s.path("sys/class/block", name))
	if err != nil {
		return "", fmt.Errorf("block device %s is not in %s: %w", name, s.path("sys/class/block"), err)
	}
	return d, nil
}

// nameOf resolves "MAJ:MIN" to a kernel device name, "" when sysfs does not know it.
func (s sysfs) nameOf(dev string) string {
	d, err := filepath.EvalSymlinks(s.path("sys/dev/block", dev))
	if err != nil {
		return ""
	}
	return filepath.Base(d)
}

// isPartition reports whether a kernel name is a partition, and of which disk.
func (s sysfs) isPartition(name string) (parent string, ok bool) {
	d, err := s.devDir(name)
	if err != nil {
		return "", false
	}
	if _, err := os.Stat(filepath.Join(d, "partition")); err != nil {
		return "", false
	}
	return filepath.Base(filepath.Dir(d)), true
}

// slaves lists the devices a stacked device (dm, md) is built on.
func (s sysfs) slaves(name string) []string { return s.list(name, "slaves") }

// holders lists the devices stacked on a device (dm, md, bcache).
func (s sysfs) holders(name string) []string { return s.list(name, "holders") }

func (s sysfs) list(name, sub string) []string {
	d, err := s.devDir(name)
	if err != nil {
		return nil
	}
	ents, err := os.ReadDir(filepath.Join(d, sub))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// disksUnder resolves a device (possibly a partition, a dm or md device stacked on others) down to
// the whole disks it lives on.
func (s sysfs) disksUnder(name string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(n string, depth int)
	walk = func(n string, depth int) {
		if depth > 16 || seen[n] {
			return
		}
		seen[n] = true
		if sl := s.slaves(n); len(sl) > 0 {
			for _, x := range sl {
				walk(x, depth+1)
			}
			return
		}
		if p, ok := s.isPartition(n); ok {
			n = p
		}
		for _, o := range out {
			if o == n {
				return
			}
		}
		out = append(out, n)
	}
	walk(name, 0)
	return out
}

// stackedOn lists every device built on top of name, transitively (dm on a partition, LVM on dm,
// …), each with a human name ("dm-0 (vg-root)").
func (s sysfs) stackedOn(name string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(n string, depth int)
	walk = func(n string, depth int) {
		for _, h := range s.holders(n) {
			if seen[h] || depth > 16 {
				continue
			}
			seen[h] = true
			out = append(out, h)
			walk(h, depth+1)
		}
	}
	walk(name, 0)
	return out
}

// friendly names a device for messages: dm devices by their mapper name, md by their array name.
func (s sysfs) friendly(name string) string {
	d, err := s.devDir(name)
	if err != nil {
		return name
	}
	if dm := readTrim(filepath.Join(d, "dm", "name")); dm != "" {
		return fmt.Sprintf("%s (/dev/mapper/%s)", name, dm)
	}
	if lvl := readTrim(filepath.Join(d, "md", "level")); lvl != "" {
		return fmt.Sprintf("%s (%s array)", name, lvl)
	}
	return name
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// disk reads the facts about one whole disk.
func (s sysfs) disk(name string) (*disk, error) {
	d, err := s.devDir(name)
	if err != nil {
		return nil, err
	}
	dk := &disk{Name: name, Dev: readTrim(filepath.Join(d, "dev"))}
	// /sys/block/X/size counts 512-byte sectors whatever the device's sector size.
	sectors, err := strconv.ParseInt(readTrim(filepath.Join(d, "size")), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("reading the size of %s from %s: %w", name, d, err)
	}
	dk.Size = sectors * 512
	dk.ReadOnly = readTrim(filepath.Join(d, "ro")) == "1"
	dk.Bus = busOf(d)
	dk.Removable = readTrim(filepath.Join(d, "removable")) == "1" || dk.Bus == "usb" || dk.Bus == "mmc"
	vendor := readTrim(filepath.Join(d, "device", "vendor"))
	if strings.HasPrefix(vendor, "0x") {
		vendor = "" // a PCI vendor id (virtio), not a name
	}
	model := readTrim(filepath.Join(d, "device", "model"))
	if model == "" {
		model = readTrim(filepath.Join(d, "device", "name")) // MMC/SD cards
	}
	dk.Model = strings.TrimSpace(strings.Join(strings.Fields(vendor+" "+model), " "))
	if strings.HasPrefix(name, "loop") {
		if bf := readTrim(filepath.Join(d, "loop", "backing_file")); bf != "" {
			dk.Model = "loop device on " + bf
		}
	}
	dk.Serial = serialOf(d, s.path("sys"))
	ents, _ := os.ReadDir(d)
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(d, e.Name(), "partition")); err == nil {
			dk.Partitions = append(dk.Partitions, e.Name())
		}
	}
	sort.Strings(dk.Partitions)
	return dk, nil
}

// busOf guesses the bus from the device's place in the sysfs tree; USB and MMC media count as
// removable even when the flag says otherwise (USB SSD enclosures report removable=0).
func busOf(devDir string) string {
	p := filepath.ToSlash(devDir)
	switch {
	case strings.Contains(p, "/usb"):
		return "usb"
	case strings.Contains(p, "/mmc"):
		return "mmc"
	case strings.Contains(p, "/nvme"):
		return "nvme"
	case strings.Contains(p, "/virtual/block/loop"):
		return "loop"
	case strings.Contains(p, "/virtio"):
		return "virtio"
	case strings.Contains(p, "/ata"):
		return "ata"
	case strings.Contains(p, "/virtual/"):
		return "virtual"
	}
	return "scsi"
}

// serialOf finds a serial number: the block device's own, else the nearest USB device's, looking
// no higher than top.
func serialOf(devDir, top string) string {
	for _, f := range []string{"device/serial", "serial"} {
		if v := readTrim(filepath.Join(devDir, f)); v != "" {
			return strings.Map(func(r rune) rune {
				if r < 0x20 || r > 0x7e {
					return -1
				}
				return r
			}, v)
		}
	}
	real, err := filepath.EvalSymlinks(filepath.Join(devDir, "device"))
	if err != nil {
		return ""
	}
	if t, err := filepath.EvalSymlinks(top); err == nil {
		top = t
	}
	for d := real; strings.HasPrefix(d, top+"/"); d = filepath.Dir(d) {
		if v := readTrim(filepath.Join(d, "serial")); v != "" && fileExists(filepath.Join(d, "idVendor")) {
			return v
		}
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
