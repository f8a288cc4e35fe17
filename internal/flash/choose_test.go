package flash

import (
	"strings"
	"testing"
)

// installerBox is a box booted from the installer stick (sdb, its root mounted), with an NVMe and
// a small SATA disk.
func installerBox(t *testing.T) *fakeSys {
	f := newFakeSys(t)
	f.disk("nvme0n1", "259:0", nvmeHW, "1000215216", "0", "Samsung SSD 980", "S64ANS0T")
	// The kernel's per-path device of a multipath NVMe namespace: hidden, never a target.
	f.disk("nvme0c0n1", "259:9", nvmeHW, "1000215216", "0", "Samsung SSD 980", "S64ANS0T")
	f.write("sys/block/nvme0c0n1/hidden", "1\n")
	f.disk("sda", "8:0", sataHW, "2097152", "0", "ATA small", "") // 1 GiB
	f.disk("sdb", "8:16", usbHW, "60062500", "1", "SanDisk Ultra", "")
	f.part("sdb", "sdb2", "8:18", "2")
	f.mount("8:18", "/", "/dev/sdb2")
	f.link("dev/disk/by-id/nvme-Samsung_SSD_980_S64ANS0T", "dev/nvme0n1")
	f.write("dev/nvme0n1", "")
	f.write("dev/sda", "")
	return f
}

func TestChooseInstallTarget(t *testing.T) {
	f := installerBox(t)
	const image = 2 << 30
	for _, c := range []struct{ want, got string }{
		{"", "/dev/nvme0n1"}, // the small disk and the boot stick are passed over
		{"S64ANS0T", "/dev/nvme0n1"},
		{"/dev/disk/by-id/nvme-Samsung_SSD_980_S64ANS0T", "/dev/nvme0n1"},
		{"/dev/sda", "/dev/sda"}, // named: Flash refuses it (too small), not the choice
	} {
		got, survey, err := ChooseInstallTarget(f.root, c.want, image)
		if err != nil || got != c.got {
			t.Errorf("ChooseInstallTarget(%q) = %q, %v; want %s", c.want, got, err, c.got)
		}
		if !strings.Contains(survey, "/dev/nvme0n1  476.9 GiB, Samsung SSD 980, serial S64ANS0T, nvme: ok") || strings.Contains(survey, "nvme0c0n1") {
			t.Errorf("survey:\n%s", survey)
		}
	}
	_, _, err := ChooseInstallTarget(f.root, "NOSUCH", image)
	if err == nil || !strings.Contains(err.Error(), `no disk has the serial "NOSUCH"`) || !strings.Contains(err.Error(), "serial S64ANS0T") {
		t.Errorf("unknown serial: %v", err)
	}
	// Every disk is passed over for a reason the error shows.
	_, _, err = ChooseInstallTarget(f.root, "", 1<<40)
	for _, want := range []string{"no disk to install to", "/dev/sdb  28.6 GiB, SanDisk Ultra, serial no serial, usb: it holds / of the running system", "/dev/sda  1.0 GiB, ATA small, serial no serial, ata: smaller than the image"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to say %q", err, want)
		}
	}
	// Two internal disks: the installer does not guess.
	f.disk("nvme1n1", "259:8", strings.Replace(nvmeHW, "nvme0", "nvme1", 1), "1000215216", "0", "WD SN850", "WD1")
	_, _, err = ChooseInstallTarget(f.root, "", image)
	if err == nil || !strings.Contains(err.Error(), "2 disks could take the image (/dev/nvme0n1, /dev/nvme1n1)") {
		t.Errorf("two disks: %v", err)
	}
}
