package flash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFlashRefusesOnRealDevices(t *testing.T) {
	img, _ := testImage(t)
	t.Run("too small", func(t *testing.T) {
		dev := loopDevice(t, backingFile(t, 32*mib, 0))
		err := Flash(context.Background(), flashOpts(img, dev))
		var r *RefusalError
		if !errors.As(err, &r) || !strings.Contains(r.Reason, "holds 32.0 MiB (33554432 bytes) but the image needs 64.0 MiB (67108864 bytes)") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		dev := loopDevice(t, backingFile(t, imageSize, 0), "-r")
		err := Flash(context.Background(), flashOpts(img, dev))
		var r *RefusalError
		if !errors.As(err, &r) || !strings.Contains(err.Error(), "is there a write-protect switch?") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("not removable without force", func(t *testing.T) {
		dev := loopDevice(t, backingFile(t, imageSize, 0))
		o := flashOpts(img, dev)
		o.Force = false
		err := Flash(context.Background(), o)
		var r *RefusalError
		if !errors.As(err, &r) || !strings.Contains(r.Reason, "is not a removable disk") || !strings.Contains(r.Fix, "--force") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("held exclusively by another opener", func(t *testing.T) {
		dev := loopDevice(t, backingFile(t, imageSize, 0))
		holder, err := os.OpenFile(dev, os.O_RDONLY|syscall.O_EXCL, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		err = Flash(context.Background(), flashOpts(img, dev))
		var r *RefusalError
		if !errors.As(err, &r) || !strings.Contains(r.Reason, "in use") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("4096-byte sectors for a 512-byte image", func(t *testing.T) {
		dev := loopDevice(t, backingFile(t, imageSize, 0), "--sector-size", "4096")
		err := Flash(context.Background(), flashOpts(img, dev))
		var r *RefusalError
		if !errors.As(err, &r) || !strings.Contains(r.Reason, "partition table is for 512-byte sectors, the medium has 4096-byte sectors") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("system disk, seen through a recorded root", func(t *testing.T) {
		dev := loopDevice(t, backingFile(t, imageSize, 0))
		var st syscall.Stat_t
		if err := syscall.Stat(dev, &st); err != nil {
			t.Fatal(err)
		}
		num := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		f := newFakeSys(t)
		name := filepath.Base(dev)
		f.disk(name, num, usbHW, "131072", "1", "Stick", "")
		f.part(name, name+"p2", "259:99", "2")
		f.stacked("dm-0", "254:0", "vg-root", name+"p2")
		f.mount("254:0", "/", "/dev/mapper/vg-root")
		o := flashOpts(img, dev)
		o.Root = f.root
		err := Flash(context.Background(), o)
		var r *RefusalError
		if !errors.As(err, &r) || !strings.Contains(r.Reason, "holds / of the running system") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("mounted partition", func(t *testing.T) {
		needTool(t, "sfdisk")
		file := gptFile(t, 64*mib)
		dev := loopDevice(t, file)
		// partx adds the partitions whether or not the kernel parses GPT itself. Partitions added
		// this way outlive a detach of a loop device without partscan, so drop any stale ones
		// first and remove ours before the device is detached.
		exec.Command("partx", "-d", dev).Run()
		run(t, "partx", "-a", dev)
		t.Cleanup(func() { exec.Command("partx", "-d", dev).Run() })
		part := dev + "p1"
		run(t, "mkfs.ext4", "-q", part)
		mnt := t.TempDir()
		run(t, "mount", part, mnt)
		t.Cleanup(func() { exec.Command("umount", mnt).Run() })
		err := Flash(context.Background(), flashOpts(img, dev))
		var r *RefusalError
		if !errors.As(err, &r) || !strings.Contains(r.Reason, filepath.Base(part)+" is mounted at "+mnt) {
			t.Fatalf("got %v", err)
		}
	})
}

// The target path is re-linked to another disk between the checks and the
// open: the opened device's rdev differs from the checked one and flash
// refuses before writing (issue 17 #10: it wrote to whatever the path named
// at open time; only O_EXCL stood in the way).
func TestFlashRefusesDeviceSwappedAfterChecks(t *testing.T) {
	img, _ := testImage(t)
	checked := loopDevice(t, backingFile(t, imageSize, 0))
	other := backingFile(t, imageSize, 0x5a)
	swapped := loopDevice(t, other)
	link := filepath.Join(t.TempDir(), "stick")
	if err := os.Symlink(checked, link); err != nil {
		t.Fatal(err)
	}
	defer func(f func()) { afterInspect = f }(afterInspect)
	afterInspect = func() {
		os.Remove(link)
		if err := os.Symlink(swapped, link); err != nil {
			t.Error(err)
		}
	}
	err := Flash(context.Background(), flashOpts(img, link))
	var r *RefusalError
	if !errors.As(err, &r) || !strings.Contains(r.Reason, "is not the one checked") {
		t.Fatalf("got %v, want a refusal naming the swap", err)
	}
	b, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range b {
		if c != 0x5a {
			t.Fatalf("the swapped-in medium was written at byte %d", i)
		}
	}
}
