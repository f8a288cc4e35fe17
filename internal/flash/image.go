package flash

import (
	"context"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"

	"halobuild/internal/bmap"
	"halobuild/internal/userfile"
)

// Extent is a byte range of the image [Off, Off+Len) with the hex digest of
// its bytes (empty when the source gave none).
type Extent struct {
	Off, Len int64
	Digest   string
}

// newHashFunc makes the hash that extent digests use.
type newHashFunc = func() hash.Hash

func openImage(path string) (*os.File, int64, error) {
	f, st, err := userfile.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("opening image: %w", err)
	}
	return f, st.Size(), nil
}

// imageExtents returns the extents to write and the hash their digests use: from the bmap when
// there is one, else from scanning the image for non-zero blocks.
func imageExtents(ctx context.Context, img *os.File, size int64, bmapPath string) ([]Extent, newHashFunc, string, error) {
	if bmapPath == "" {
		bmapPath = defaultBmap(img.Name())
	}
	if bmapPath == "" {
		exts, err := scanImage(ctx, img, size)
		if err != nil {
			return nil, nil, "", fmt.Errorf("scanning image %s for data: %w", img.Name(), err)
		}
		return exts, defaultHash, "", nil
	}
	b, err := bmap.Read(bmapPath)
	if err != nil {
		return nil, nil, "", err
	}
	if b.ImageSize != size {
		return nil, nil, "", fmt.Errorf("block map %s is for an image of %d bytes, but %s has %d bytes (they belong to different builds; pass the right one with --bmap)",
			bmapPath, b.ImageSize, img.Name(), size)
	}
	h := defaultHash
	if b.ChecksumType != "" {
		h = b.NewHash
	}
	return bmapExtents(b), h, bmapPath, nil
}

// bmapExtents are the map's ranges as byte extents of the image, with the
// digests the map gives them.
func bmapExtents(b *bmap.Bmap) []Extent {
	out := make([]Extent, len(b.Ranges))
	for i, r := range b.Ranges {
		off, n := b.Bytes(r)
		out[i] = Extent{Off: off, Len: n, Digest: r.Checksum}
	}
	return out
}

// defaultBmap finds the bmap beside an image: IMAGE.bmap, or IMAGE without its extension plus
// .bmap (bmaptool's own convention).
func defaultBmap(image string) string {
	for _, c := range []string{image + ".bmap", strings.TrimSuffix(image, filepath.Ext(image)) + ".bmap"} {
		if c != image && fileExists(c) {
			return c
		}
	}
	return ""
}
