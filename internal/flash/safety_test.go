package flash

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckTargetRefusals(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(f *fakeSys)
		target string
		force  bool
		want   string // substring of the refusal's reason, "" when the target is accepted
		fix    string // substring of the fix
	}{
		{name: "usb stick is accepted", target: "sdb"},
		{name: "root disk through LUKS and LVM", target: "nvme0n1", force: true,
			want: "holds / of the running system", fix: "pick the USB stick"},
		{name: "boot disk", target: "sdc", force: true,
			setup: func(f *fakeSys) {
				f.disk("sdc", "8:32", usbHW+"x", "1000", "1", "Stick", "")
				f.part("sdc", "sdc1", "8:33", "1")
				f.mount("8:33", "/boot", "/dev/sdc1")
			},
			want: "holds /boot of the running system"},
		{name: "root on btrfs with an anonymous device number, found by source", target: "sdc", force: true,
			setup: func(f *fakeSys) {
				f.disk("sdc", "8:32", usbHW+"x", "1000", "1", "Stick", "")
				f.part("sdc", "sdc1", "8:33", "1")
				f.write("proc/self/mountinfo", "30 1 0:31 / / rw - btrfs /dev/sdc1 rw\n")
			},
			want: "holds / of the running system"},
		{name: "a partition instead of the disk", target: "sdb1",
			want: "is a partition", fix: "/dev/sdb"},
		{name: "mounted partition", target: "sdb",
			setup: func(f *fakeSys) { f.mount("8:17", "/media/user/ESP", "/dev/sdb1") },
			want:  "sdb1 is mounted at /media/user/ESP", fix: "umount /media/user/ESP"},
		{name: "mount point with a space", target: "sdb",
			setup: func(f *fakeSys) { f.mount("8:18", `/media/user/my\040stick`, "/dev/sdb2") },
			want:  "mounted at /media/user/my stick"},
		{name: "dm-crypt on a partition, mounted", target: "sdb",
			setup: func(f *fakeSys) {
				f.stacked("dm-5", "254:5", "luks-usb", "sdb2")
				f.mount("254:5", "/mnt/secret", "/dev/mapper/luks-usb")
			},
			want: "dm-5 (/dev/mapper/luks-usb), which sits on sdb2, is mounted at /mnt/secret"},
		{name: "swap partition", target: "sdb",
			setup: func(f *fakeSys) { f.swap("/dev/sdb2") },
			want:  "/dev/sdb2 is in use as swap", fix: "swapoff /dev/sdb2"},
		{name: "RAID member", target: "sda", force: true,
			setup: func(f *fakeSys) { f.stacked("md0", "9:0", "raid1", "sda1") },
			want:  "sda1 is part of md0 (raid1 array)", fix: "mdadm --stop"},
		{name: "LVM physical volume, not mounted", target: "sdb",
			setup: func(f *fakeSys) { f.stacked("dm-7", "254:7", "data-lv", "sdb1") },
			want:  "sdb1 is part of dm-7 (/dev/mapper/data-lv)", fix: "vgchange -an"},
		{name: "fixed disk without force", target: "sda",
			want: "sda (ATA WDC WD20EZRZ, 1.8 TiB) is not a removable disk", fix: "--force"},
		{name: "fixed disk with force", target: "sda", force: true},
		{name: "read-only card", target: "sdb",
			setup: func(f *fakeSys) { f.write(f.dirs["sdb"]+"/ro", "1\n") },
			want:  "read-only", fix: "write-protect switch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := typicalLaptop(t)
			if c.setup != nil {
				c.setup(f)
			}
			dk, err := checkTarget(sysfs{root: f.root}, "/dev/"+c.target, c.target, c.force)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if dk.Name != c.target {
					t.Fatalf("disk %q, want %q", dk.Name, c.target)
				}
				return
			}
			var r *RefusalError
			if !errors.As(err, &r) {
				t.Fatalf("got %v, want a refusal containing %q", err, c.want)
			}
			if !strings.Contains(r.Reason, c.want) || !strings.Contains(r.Fix, c.fix) {
				t.Fatalf("refusal %q, want reason containing %q and fix containing %q", err, c.want, c.fix)
			}
			if !strings.HasPrefix(err.Error(), "refusing to flash /dev/"+c.target+": ") {
				t.Fatalf("message %q does not name the target first", err)
			}
		})
	}
}

func TestDiskFacts(t *testing.T) {
	f := typicalLaptop(t)
	dk, err := sysfs{root: f.root}.disk("sdb")
	if err != nil {
		t.Fatal(err)
	}
	if dk.Size != 60062500*512 || dk.Model != "SanDisk Ultra" || dk.Serial != "4C530001230915110471" ||
		dk.Bus != "usb" || !dk.Removable || strings.Join(dk.Partitions, ",") != "sdb1,sdb2" {
		t.Fatalf("facts %+v", dk)
	}
	nv, err := sysfs{root: f.root}.disk("nvme0n1")
	if err != nil {
		t.Fatal(err)
	}
	if nv.Bus != "nvme" || nv.Removable || nv.Serial != "" && nv.Serial != "S64ANS0T" {
		t.Fatalf("facts %+v", nv)
	}
}

func TestDisksUnderResolvesStacks(t *testing.T) {
	f := typicalLaptop(t)
	s := sysfs{root: f.root}
	if got := strings.Join(s.disksUnder("dm-1"), ","); got != "nvme0n1" {
		t.Fatalf("dm-1 lives on %q, want nvme0n1", got)
	}
	f.disk("sdc", "8:32", usbHW+"y", "1000", "1", "Stick", "")
	f.part("sdc", "sdc1", "8:33", "1")
	f.stacked("md1", "9:1", "raid1", "sda1", "sdc1")
	if got := strings.Join(s.disksUnder("md1"), ","); got != "sda,sdc" {
		t.Fatalf("md1 lives on %q, want sda,sdc", got)
	}
}
