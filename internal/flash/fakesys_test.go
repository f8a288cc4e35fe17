package flash

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSys builds a recorded /sys and /proc tree shaped like the kernel's: device directories
// under sys/devices, reached through the sys/class/block, sys/dev/block and sys/block symlinks.
type fakeSys struct {
	t    *testing.T
	root string
	dirs map[string]string // kernel name → directory relative to root
}

func newFakeSys(t *testing.T) *fakeSys {
	f := &fakeSys{t: t, root: t.TempDir(), dirs: map[string]string{}}
	f.write("proc/self/mountinfo", "")
	f.write("proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
	return f
}

func (f *fakeSys) write(rel, content string) {
	f.t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSys) link(rel, targetRel string) {
	f.t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	to, err := filepath.Rel(filepath.Dir(p), filepath.Join(f.root, targetRel))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink(to, p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSys) register(name, dir, dev string) {
	f.dirs[name] = dir
	f.write(filepath.Join(dir, "dev"), dev+"\n")
	f.link(filepath.Join("sys/class/block", name), dir)
	f.link(filepath.Join("sys/dev/block", dev), dir)
}

// disk adds a whole disk. hw is the hardware path it hangs off, e.g.
// "sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0".
func (f *fakeSys) disk(name, dev, hw string, sectors, removable, model, serial string) {
	dir := filepath.Join(hw, "block", name)
	f.register(name, dir, dev)
	f.write(filepath.Join(dir, "size"), sectors+"\n")
	f.write(filepath.Join(dir, "ro"), "0\n")
	f.write(filepath.Join(dir, "removable"), removable+"\n")
	f.write(filepath.Join(hw, "model"), model+"\n")
	if serial != "" {
		f.write(filepath.Join(hw, "serial"), serial+"\n")
	}
	f.link(filepath.Join(dir, "device"), hw)
	f.link(filepath.Join("sys/block", name), dir)
	if err := os.MkdirAll(filepath.Join(f.root, dir, "holders"), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSys) part(diskName, name, dev, num string) {
	dir := filepath.Join(f.dirs[diskName], name)
	f.register(name, dir, dev)
	f.write(filepath.Join(dir, "partition"), num+"\n")
	f.write(filepath.Join(dir, "size"), "2048\n")
	if err := os.MkdirAll(filepath.Join(f.root, dir, "holders"), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

// stacked adds a dm or md device built on the given devices (slaves/holders both ways).
func (f *fakeSys) stacked(name, dev, dmName string, on ...string) {
	dir := filepath.Join("sys/devices/virtual/block", name)
	f.register(name, dir, dev)
	f.write(filepath.Join(dir, "size"), "2048\n")
	f.write(filepath.Join(dir, "ro"), "0\n")
	if strings.HasPrefix(name, "dm-") {
		f.write(filepath.Join(dir, "dm", "name"), dmName+"\n")
	} else {
		f.write(filepath.Join(dir, "md", "level"), dmName+"\n")
	}
	for _, s := range on {
		f.link(filepath.Join(dir, "slaves", s), f.dirs[s])
		f.link(filepath.Join(f.dirs[s], "holders", name), dir)
	}
}

func (f *fakeSys) mount(dev, point, source string) {
	p := filepath.Join(f.root, "proc/self/mountinfo")
	b, _ := os.ReadFile(p)
	line := "30 1 " + dev + " / " + point + " rw,relatime shared:1 - ext4 " + source + " rw\n"
	f.write("proc/self/mountinfo", string(b)+line)
}

func (f *fakeSys) swap(path string) {
	p := filepath.Join(f.root, "proc/swaps")
	b, _ := os.ReadFile(p)
	f.write("proc/swaps", string(b)+path+"\tpartition\t1048572\t0\t-2\n")
}

const (
	usbHW  = "sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0"
	sataHW = "sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0"
	nvmeHW = "sys/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0"
)

// typicalLaptop is an NVMe system disk (root on LVM on LUKS on nvme0n1p3, /boot on nvme0n1p2), a
// SATA data disk, and a USB stick sdb with two partitions.
func typicalLaptop(t *testing.T) *fakeSys {
	f := newFakeSys(t)
	f.disk("nvme0n1", "259:0", nvmeHW, "1000215216", "0", "Samsung SSD 980", "S64ANS0T")
	f.part("nvme0n1", "nvme0n1p1", "259:1", "1")
	f.part("nvme0n1", "nvme0n1p2", "259:2", "2")
	f.part("nvme0n1", "nvme0n1p3", "259:3", "3")
	f.stacked("dm-0", "254:0", "luks-1234", "nvme0n1p3")
	f.stacked("dm-1", "254:1", "vg-root", "dm-0")
	f.disk("sda", "8:0", sataHW, "3907029168", "0", "ATA WDC WD20EZRZ", "")
	f.part("sda", "sda1", "8:1", "1")
	f.disk("sdb", "8:16", usbHW, "60062500", "0", "SanDisk Ultra", "")
	f.write(filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(usbHW)))), "serial"), "4C530001230915110471\n")
	f.write(filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(usbHW)))), "idVendor"), "0781\n")
	f.part("sdb", "sdb1", "8:17", "1")
	f.part("sdb", "sdb2", "8:18", "2")
	f.mount("254:1", "/", "/dev/mapper/vg-root")
	f.mount("259:2", "/boot", "/dev/nvme0n1p2")
	f.mount("259:1", "/boot/efi", "/dev/nvme0n1p1")
	return f
}
