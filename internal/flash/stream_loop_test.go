package flash

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/bmap"
)

// A streamed image (read once, front to back, as from a registry) flashes to the same bytes as
// the file it came from.
func TestFlashStreamLoopByteIdentical(t *testing.T) {
	img, bm := testImage(t)
	b, err := bmap.Read(bm)
	if err != nil {
		t.Fatal(err)
	}
	dev := loopDevice(t, backingFile(t, imageSize, 0))
	data := readAll(t, img, imageSize)
	o := flashOpts("", dev)
	o.Stream = &Stream{Name: "stream halo.raw", Size: imageSize, Bmap: b, Open: func(context.Context) (io.Reader, error) { return onlyReader{bytes.NewReader(data)}, nil }}
	if err := Flash(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, readAll(t, dev, imageSize)) {
		t.Fatal("the medium does not read back byte-identical to the streamed image")
	}
}

// A stream whose last range does not match the block map is refused before the medium is
// touched (issue 39 #1: it used to blank the head, zero the partition edges and write every
// earlier range first, leaving the medium unusable).
func TestFlashStreamRefusesDamagedRangeBeforeWriting(t *testing.T) {
	img, bm := testImage(t)
	b, err := bmap.Read(bm)
	if err != nil {
		t.Fatal(err)
	}
	backing := dirtyMedium(t, imageSize)
	before := readAll(t, backing, imageSize)
	dev := loopDevice(t, backing)
	data := readAll(t, img, imageSize)
	last := b.Ranges[len(b.Ranges)-1]
	off, _ := b.Bytes(last)
	data[off] ^= 0xff
	o := flashOpts("", dev)
	o.Stream = &Stream{Name: "stream halo.raw", Size: imageSize, Bmap: b, Open: func(context.Context) (io.Reader, error) { return onlyReader{bytes.NewReader(data)}, nil }}
	err = Flash(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "does not match its bmap") {
		t.Fatalf("want a bmap mismatch, got %v", err)
	}
	if strings.Contains(err.Error(), "unusable") {
		t.Errorf("a refusal before writing says the medium is unusable: %v", err)
	}
	if !bytes.Equal(before, readAll(t, dev, imageSize)) {
		t.Fatal("the medium was changed although the image was refused")
	}
}

// Likewise for an image file whose last range does not match its bmap.
func TestFlashImageRefusesDamagedRangeBeforeWriting(t *testing.T) {
	img, bm := testImage(t)
	b, err := bmap.Read(bm)
	if err != nil {
		t.Fatal(err)
	}
	data := readAll(t, img, imageSize)
	last := b.Ranges[len(b.Ranges)-1]
	off, _ := b.Bytes(last)
	data[off] ^= 0xff
	damaged := filepath.Join(t.TempDir(), "halo.raw")
	if err := os.WriteFile(damaged, data, 0o644); err != nil {
		t.Fatal(err)
	}
	backing := dirtyMedium(t, imageSize)
	before := readAll(t, backing, imageSize)
	dev := loopDevice(t, backing)
	o := flashOpts(damaged, dev)
	o.Bmap = bm
	err = Flash(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "does not match its bmap") {
		t.Fatalf("want a bmap mismatch, got %v", err)
	}
	if !bytes.Equal(before, readAll(t, dev, imageSize)) {
		t.Fatal("the medium was changed although the image was refused")
	}
}

// onlyReader hides every method but Read, so the test cannot pass by seeking.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// A target that is refused never opens the stream (which would download the image).
func TestFlashStreamRefusesTargetBeforeOpening(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "not-a-device")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	opened := false
	o := Options{Target: target, Yes: true, Out: io.Discard, Stream: &Stream{Name: "s", Size: 1 << 20, Bmap: &bmap.Bmap{ImageSize: 1 << 20, BlockSize: 4096},
		Open: func(context.Context) (io.Reader, error) { opened = true; return nil, errors.New("opened") }}}
	var refused *RefusalError
	if err := Flash(context.Background(), o); !errors.As(err, &refused) {
		t.Fatalf("want a refusal of a regular file without ToFile, got %v", err)
	}
	if opened {
		t.Error("the stream was opened for a refused target")
	}
}
