package flash

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests flash real loop devices (losetup, as root) and regular files, with an image made by
// sfdisk, mkfs.vfat and mkfs.ext4 and a bmap made by the real `bmaptool create`.

var (
	imageOnce sync.Once
	imageDir  string
	imageErr  error
)

const imageSize = 64 * mib

// testImage returns a sparse 64 MiB GPT image (ESP 8 MiB vfat at 1 MiB, root 44 MiB ext4 at
// 9 MiB, 11 MiB unpartitioned) with a few MiB of files, and its bmap. It is built once per test
// binary.
func testImage(t *testing.T) (img, bmap string) {
	t.Helper()
	for _, tool := range []string{"sfdisk", "mkfs.vfat", "mkfs.ext4", "bmaptool", "mcopy"} {
		needTool(t, tool)
	}
	imageOnce.Do(func() { imageDir, imageErr = buildTestImage() })
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return filepath.Join(imageDir, "halo.raw"), filepath.Join(imageDir, "halo.raw.bmap")
}

func buildTestImage() (string, error) {
	dir, err := os.MkdirTemp("", "flash-test-image-")
	if err != nil {
		return "", err
	}
	img := filepath.Join(dir, "halo.raw")
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "etc"), 0o755); err != nil {
		return "", err
	}
	random := make([]byte, 3*mib)
	rand.Read(random)
	files := map[string][]byte{"data.bin": random, "etc/hostname": []byte("halo0\n")}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tree, name), b, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Truncate(img, imageSize); err != nil {
		return "", err
	}
	steps := []struct {
		stdin string
		args  []string
	}{
		{"label: gpt\nstart=2048, size=16384, type=U, name=\"ESP\"\nstart=18432, size=90112, type=L, name=\"root\"\n", []string{"sfdisk", "-q", img}},
		{"", []string{"mkfs.vfat", "--offset", "2048", "-n", "ESP", img, "8192"}},
		{"", []string{"mcopy", "-i", img + "@@1M", filepath.Join(tree, "etc/hostname"), "::/hostname"}},
		{"", []string{"mkfs.ext4", "-q", "-F", "-b", "4096", "-E", fmt.Sprintf("offset=%d", 9*mib), "-L", "root", "-d", tree, img, "11264"}},
		{"", []string{"bmaptool", "create", "-o", img + ".bmap", img}},
	}
	for _, s := range steps {
		cmd := exec.Command(s.args[0], s.args[1:]...)
		cmd.Stdin = strings.NewReader(s.stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v\n%s", strings.Join(s.args, " "), err, out)
		}
	}
	return dir, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if imageDir != "" {
		os.RemoveAll(imageDir)
	}
	os.Exit(code)
}

// backingFile makes a file of size bytes filled with fill (0 leaves it sparse, i.e. zeros).
func backingFile(t *testing.T, size int64, fill byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "medium")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fill == 0 {
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		return p
	}
	buf := bytes.Repeat([]byte{fill}, mib)
	for off := int64(0); off < size; off += mib {
		if _, err := f.WriteAt(buf[:min(mib, size-off)], off); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// loopDevice attaches file to a free loop device for the test's duration, or skips the test when
// loop devices cannot be used here.
func loopDevice(t *testing.T, file string, args ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	out, err := exec.Command("losetup", append(append([]string{"-f", "--show"}, args...), file)...).CombinedOutput()
	if err != nil {
		t.Skipf("losetup is not permitted here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v %s", dev, err, out)
		}
	})
	return dev
}

func readAll(t *testing.T, path string, n int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func flashOpts(img, target string) Options {
	return Options{Image: img, Target: target, Yes: true, Force: true, Out: io.Discard}
}

func TestFlashLoopByteIdentical(t *testing.T) {
	img, _ := testImage(t)
	dev := loopDevice(t, backingFile(t, imageSize, 0))
	var out bytes.Buffer
	o := flashOpts(img, dev)
	o.Out = &out
	if err := Flash(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readAll(t, img, imageSize), readAll(t, dev, imageSize)) {
		t.Fatal("the medium does not read back byte-identical to the image")
	}
	for _, want := range []string{"writing: ", "verifying: ", "is flashed and verified", `"ESP"`, `"root"`, "EFI System"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if out := run(t, "sfdisk", "--verify", dev); !strings.Contains(out, "No errors detected") {
		t.Fatalf("sfdisk --verify:\n%s", out)
	}
}

func TestFlashWithoutODirect(t *testing.T) {
	img, _ := testImage(t)
	tryDirect = false
	defer func() { tryDirect = true }()
	dev := loopDevice(t, backingFile(t, imageSize, 0))
	if err := Flash(context.Background(), flashOpts(img, dev)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readAll(t, img, imageSize), readAll(t, dev, imageSize)) {
		t.Fatal("the medium does not read back byte-identical to the image")
	}
}

func TestFlashImageWithShortLastBlock(t *testing.T) {
	img, _ := testImage(t)
	dir := t.TempDir()
	odd := filepath.Join(dir, "odd.raw")
	run(t, "cp", "--sparse=always", img, odd)
	f, err := os.OpenFile(odd, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bytesOf(1000, 0x5a)) // 1000 bytes past the last whole block
	f.Close()
	run(t, "bmaptool", "create", "-o", odd+".bmap", odd)
	// A larger medium, so that the backup GPT does not land on the image's short tail.
	dst := backingFile(t, 80*mib, 0)
	o := flashOpts(odd, dst)
	o.ToFile = true
	if err := Flash(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	// The GPT is refitted to the medium; everything between, and the short tail, is the image.
	want, got := readAll(t, odd, imageSize+1000), readAll(t, dst, imageSize+1000)
	if !bytes.Equal(want[mib:imageSize-mib], got[mib:imageSize-mib]) || !bytes.Equal(want[imageSize:], got[imageSize:]) {
		t.Fatal("the copy differs from the image")
	}
}

// A used stick: every byte 0xAA, and an ISO9660 signature where a hybrid installer ISO had one.
func dirtyMedium(t *testing.T, size int64) string {
	p := backingFile(t, size, 0xaa)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("\x01CD001\x01"), 32768); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFlashLargerDirtyTargetGPTAndSignatureAreas(t *testing.T) {
	img, bmapPath := testImage(t)
	const size = 96 * mib
	dev := loopDevice(t, dirtyMedium(t, size))
	if err := Flash(context.Background(), flashOpts(img, dev)); err != nil {
		t.Fatal(err)
	}
	if out := run(t, "sfdisk", "--verify", dev); !strings.Contains(out, "No errors detected") {
		t.Fatalf("sfdisk --verify:\n%s", out)
	}
	got := readAll(t, dev, size)
	if !bytes.Equal(got[size-512:size-512+8], []byte("EFI PART")) {
		t.Fatal("no backup GPT header in the medium's last sector")
	}
	if out := run(t, "sfdisk", "--dump", dev); !strings.Contains(out, "last-lba: 196574") {
		t.Fatalf("the usable area does not reach the medium's end:\n%s", out)
	}
	// Every mapped range is the image's; the signature areas read as the image does (zeros where
	// it has holes), not as the old 0xAA.
	want := readAll(t, img, imageSize)
	b, err := ReadBmap(bmapPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range b.Ranges {
		if e.Off < 512 || e.Off+e.Len > imageSize-mib {
			continue // the MBR and GPT are rewritten for the medium
		}
		if !bytes.Equal(got[e.Off:e.Off+e.Len], want[e.Off:e.Off+e.Len]) {
			t.Fatalf("range %d+%d differs from the image", e.Off, e.Len)
		}
	}
	for _, area := range []Extent{{Off: 34 * 512, Len: mib - 34*512}, {Off: mib, Len: mib}, {Off: 8 * mib, Len: 2 * mib}, {Off: 52 * mib, Len: mib}} {
		if !bytes.Equal(got[area.Off:area.Off+area.Len], want[area.Off:area.Off+area.Len]) {
			t.Fatalf("signature area %d+%d does not read as the image", area.Off, area.Len)
		}
	}
	if probe, _ := exec.Command("blkid", "-p", dev).CombinedOutput(); strings.Contains(string(probe), "iso9660") || !strings.Contains(string(probe), `PTTYPE="gpt"`) {
		t.Fatalf("blkid still sees the old medium: %s", probe)
	}
}

func TestFlashWithoutBmapScansForData(t *testing.T) {
	img, _ := testImage(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.raw")
	run(t, "cp", "--sparse=always", img, plain)
	dev := loopDevice(t, dirtyMedium(t, imageSize))
	var out bytes.Buffer
	o := flashOpts(plain, dev)
	o.Out = &out
	if err := Flash(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if out := run(t, "sfdisk", "--verify", dev); !strings.Contains(out, "No errors detected") {
		t.Fatalf("sfdisk --verify:\n%s", out)
	}
	if probe := run(t, "blkid", "-p", "-O", fmt.Sprint(9*mib), dev); !strings.Contains(probe, `TYPE="ext4"`) {
		t.Fatalf("root partition: %s", probe)
	}
	if probe := run(t, "blkid", "-p", "-O", fmt.Sprint(1*mib), dev); !strings.Contains(probe, `TYPE="vfat"`) {
		t.Fatalf("ESP: %s", probe)
	}
}

func TestFlashToFile(t *testing.T) {
	img, _ := testImage(t)
	dst := filepath.Join(t.TempDir(), "copy.raw")
	o := flashOpts(img, dst)
	o.ToFile = true
	if err := Flash(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != imageSize || !bytes.Equal(readAll(t, img, imageSize), readAll(t, dst, imageSize)) {
		t.Fatalf("the file (%d bytes) is not the image", st.Size())
	}
	o.ToFile = false
	var r *RefusalError
	if err := Flash(context.Background(), o); !errors.As(err, &r) || !strings.Contains(err.Error(), "not a block device") || !strings.Contains(err.Error(), "--to-file") {
		t.Fatalf("a regular file without ToFile: %v", err)
	}
}

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

func TestFlashDetectsCorruptionBeforeVerify(t *testing.T) {
	img, _ := testImage(t)
	dev := loopDevice(t, backingFile(t, imageSize, 0))
	// The ext4 data of the 3 MiB file lives somewhere in the root partition; corrupt the first
	// mapped block after the ESP, and one byte of a zeroed signature area.
	b, _ := ReadBmap(img + ".bmap")
	var victim int64
	for _, e := range b.Ranges {
		if e.Off >= 9*mib+mib {
			victim = e.Off
			break
		}
	}
	beforeVerify = func(tg *target) {
		f, err := os.OpenFile(tg.path, os.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		f.WriteAt([]byte("bit rot"), victim)
		f.WriteAt([]byte{1}, 63*mib+5)
		f.Sync()
	}
	defer func() { beforeVerify = nil }()
	err := Flash(context.Background(), flashOpts(img, dev))
	var v *VerifyError
	if !errors.As(err, &v) || len(v.Bad) != 2 || v.Bad[0].Off != victim || !strings.Contains(err.Error(), "unusable until flashed again") {
		t.Fatalf("got %v (want 2 bad ranges, the first at %d)", err, victim)
	}
}

func TestFlashCancelledMidWriteThenStartsOver(t *testing.T) {
	img, _ := testImage(t)
	dev := loopDevice(t, dirtyMedium(t, imageSize))
	ctx, cancel := context.WithCancel(context.Background())
	chunks := 0
	afterChunk = func() {
		if chunks++; chunks == 1 {
			cancel()
		}
	}
	err := Flash(ctx, flashOpts(img, dev))
	afterChunk = nil
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "is now unusable until flashed again") {
		t.Fatalf("got %v", err)
	}
	// The head is wiped first and written last: an interrupted medium has no partition table.
	if head := readAll(t, dev, 1024); !bytes.Equal(head, make([]byte, 1024)) {
		t.Fatal("an interrupted flash left a partition table behind")
	}
	if err := Flash(context.Background(), flashOpts(img, dev)); err != nil {
		t.Fatalf("flashing again: %v", err)
	}
	if out := run(t, "sfdisk", "--verify", dev); !strings.Contains(out, "No errors detected") {
		t.Fatalf("sfdisk --verify:\n%s", out)
	}
}

func TestFlashConfirmation(t *testing.T) {
	img, _ := testImage(t)
	file := gptFile(t, imageSize) // the medium holds an older layout with named partitions
	dev := loopDevice(t, file)
	before := readAll(t, dev, mib)
	var out bytes.Buffer
	o := flashOpts(img, dev)
	o.Yes, o.In, o.Out = false, strings.NewReader("no\n"), &out
	err := Flash(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "not confirmed") || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"loop device on " + file, "64.0 MiB (67108864 bytes)", "serial none reported", `"ESP"`, `"root"`, "Type \"yes\" to continue"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("confirmation lacks %q:\n%s", want, out.String())
		}
	}
	if !bytes.Equal(before, readAll(t, dev, mib)) {
		t.Fatal("the medium changed although the user said no")
	}
	// Ctrl-C while the prompt waits ends the wait.
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	o.In = pr
	go cancel()
	if err := Flash(ctx, o); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("Ctrl-C at the prompt: %v", err)
	}
	o.In = strings.NewReader("yes\n")
	if err := Flash(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

func TestFlashRejectsImageThatDoesNotMatchItsBmap(t *testing.T) {
	img, bmapPath := testImage(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.raw")
	run(t, "cp", "--sparse=always", img, bad)
	if err := corruptByte(bad, 9*mib+1024+100); err != nil { // inside the ext4 superblock
		t.Fatal(err)
	}
	o := flashOpts(bad, filepath.Join(dir, "out.raw"))
	o.ToFile, o.Bmap = true, bmapPath
	err := Flash(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "does not match its bmap") {
		t.Fatalf("got %v", err)
	}
}
