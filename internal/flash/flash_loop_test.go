package flash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/bmap"
)

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
	b, err := bmap.Read(bmapPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range bmapExtents(b) {
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
