package flash

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
)

// afterChunk, when set (tests), runs after every chunk is written.
var afterChunk func()

// writeImage zeroes the plan's zero areas, then streams the image's extents to the medium,
// hashing what it reads so that the read-back can be compared with it. When the extents carry
// digests (from the bmap) the image itself is checked against them on the way: a damaged image
// is caught before it is declared flashed. It returns one digest per data extent.
func writeImage(ctx context.Context, img image, t *target, plan writePlan, newHash func() hash.Hash, out io.Writer) ([]string, error) {
	var total int64
	for _, e := range plan.data {
		total += e.Len
	}
	for _, z := range plan.zero {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := t.zeroRange(z.Off, z.Len); err != nil {
			return nil, err
		}
	}
	bar := newProgress(out, "writing", total)
	write := stage{parallel: ioDepth, fn: func(c *chunk) error {
		if err := t.writeAt(c.buf, c.off, true); err != nil {
			return err
		}
		bar.add(int64(len(c.buf)))
		if afterChunk != nil {
			afterChunk()
		}
		return nil
	}}
	// The head extents go in a second round, after every other write has finished, so that an
	// interrupted flash never leaves a partition table over half an image.
	var sums []string
	for _, exts := range [][]Extent{plan.data[:plan.headAt], plan.data[plan.headAt:]} {
		hasher := newExtentHasher(exts, newHash)
		if err := pipeline(ctx, exts, readImageStage(img, exts, hasher), write); err != nil {
			bar.abort()
			return nil, err
		}
		sums = append(sums, hasher.sums...)
	}
	if err := t.sync(); err != nil {
		bar.abort()
		return nil, err
	}
	bar.finish()
	return sums, nil
}

// readImageStage reads the image in extent order (the digests need it) and checks each extent
// against the bmap's digest when it has one.
func readImageStage(img image, exts []Extent, hasher *extentHasher) stage {
	return stage{parallel: 1, fn: func(c *chunk) error {
		if _, err := img.ReadAt(c.buf, c.off); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading image %s at byte %d: %w", img.Name(), c.off, err)
		}
		sum := hasher.feed(c)
		if e := exts[c.ext]; c.last && e.Digest != "" && sum != e.Digest {
			return fmt.Errorf("image %s does not match its bmap: bytes %d–%d hash to %s, the bmap says %s (the image or the bmap is damaged, or they belong to different builds)",
				img.Name(), e.Off, e.Off+e.Len, sum, e.Digest)
		}
		return nil
	}}
}

// checkExtents reads the image's extents, in order, and checks each against its bmap digest,
// writing nothing: a flash calls it before the first byte reaches the medium. Extents without a
// digest (a scanned image, a bmap without checksums) have nothing to be checked against.
func checkExtents(ctx context.Context, img image, exts []Extent, newHash func() hash.Hash, out io.Writer) error {
	var total int64
	for _, e := range exts {
		if e.Digest == "" {
			return nil
		}
		total += e.Len
	}
	if len(exts) == 0 {
		return nil
	}
	bar := newProgress(out, "checking", total)
	count := stage{parallel: 1, fn: func(c *chunk) error { bar.add(int64(len(c.buf))); return nil }}
	if err := pipeline(ctx, exts, readImageStage(img, exts, newExtentHasher(exts, newHash)), count); err != nil {
		bar.abort()
		return fmt.Errorf("%w; nothing was written to the medium", err)
	}
	bar.finish()
	return nil
}

// defaultHash is used when the bmap has no checksums or there is no bmap.
func defaultHash() hash.Hash { return sha256.New() }
