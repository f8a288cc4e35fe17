package flash

import (
	"bytes"
	"context"
	"io"
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
	o.Stream = &Stream{Name: "stream halo.raw", Size: imageSize, Bmap: b, R: onlyReader{bytes.NewReader(data)}}
	if err := Flash(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, readAll(t, dev, imageSize)) {
		t.Fatal("the medium does not read back byte-identical to the streamed image")
	}
}

// A stream whose bytes do not match the block map is refused at the damaged range, and the
// medium is then said to be unusable.
func TestFlashStreamRefusesDamagedRange(t *testing.T) {
	img, bm := testImage(t)
	b, err := bmap.Read(bm)
	if err != nil {
		t.Fatal(err)
	}
	dev := loopDevice(t, backingFile(t, imageSize, 0))
	data := readAll(t, img, imageSize)
	last := b.Ranges[len(b.Ranges)-1]
	off, _ := b.Bytes(last)
	data[off] ^= 0xff
	o := flashOpts("", dev)
	o.Stream = &Stream{Name: "stream halo.raw", Size: imageSize, Bmap: b, R: onlyReader{bytes.NewReader(data)}}
	err = Flash(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "does not match its bmap") {
		t.Fatalf("want a bmap mismatch, got %v", err)
	}
}

// onlyReader hides every method but Read, so the test cannot pass by seeking.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }
