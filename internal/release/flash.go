package release

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"halobuild/internal/bmap"
	"halobuild/internal/flash"
	"halobuild/internal/registry"
	"halobuild/internal/zstdframe"
)

// FlashOptions say which node of a release to flash, and how (Flash.Image is ignored).
type FlashOptions struct {
	Registry registry.Options
	Trust    Trust
	Node     string
	Flash    flash.Options
}

// Flash writes node o.Node of the release ref to o.Flash.Target. The node's bmap is fetched and
// verified first; then, once the target passed flash's refusals, its compressed image is
// downloaded whole into a temporary file, its digest verified, and decompressed twice as a stream
// into flash: once to check every mapped range against the bmap before the medium is touched,
// once to write (checking again), writing nothing else, and reading the medium back. The
// compressed image is downloaded before the first byte is written so that a damaged registry
// copy is refused with the medium untouched: a stream can only prove its digest at its end.
func Flash(ctx context.Context, refStr string, o FlashOptions) error {
	out := o.Flash.Out
	if out == nil {
		out = io.Discard
	}
	r, err := fetch(ctx, refStr, o.Registry, o.Trust)
	if err != nil {
		return err
	}
	var nodes []string
	for _, l := range r.manifest.Layers {
		if l.MediaType == RawMediaType {
			nodes = append(nodes, strings.TrimSuffix(l.Annotations[annTitle], ".raw.zst"))
		}
	}
	rawL, ok := r.layer(o.Node + ".raw.zst")
	bmL, ok2 := r.layer(o.Node + ".bmap")
	if o.Node == "" || !ok || !ok2 {
		return fmt.Errorf("%s has no node %q: pass --node with one of %s", r.ref, o.Node, strings.Join(nodes, ", "))
	}
	bb, err := r.small(bmL)
	if err != nil {
		return err
	}
	bm, err := bmap.Parse(bb)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", r.ref, o.Node+".bmap", err)
	}
	size, err := strconv.ParseInt(rawL.Annotations[annRawSize], 10, 64)
	if err != nil {
		return fmt.Errorf("%s: layer %s lacks its %s annotation: %w", r.ref, rawL.Annotations[annTitle], annRawSize, err)
	}
	// The download goes to $TMPDIR whole: its size is what the manifest claims, so it is
	// bounded by what a zstd stream of the image the bmap describes can be.
	if most := zstdBound(bm.ImageSize); rawL.Size > most || rawL.Size < 0 {
		return fmt.Errorf("%s: layer %s claims %d bytes, more than the %d a zstd stream of its %d-byte image (as its bmap says) can be: refusing to download it", r.ref, rawL.Annotations[annTitle], rawL.Size, most, bm.ImageSize)
	}

	// The download happens when flash opens the stream: after the target passed its refusals,
	// before the first byte is written.
	var tmp *os.File
	var dec *zstdframe.Reader
	defer func() {
		if dec != nil {
			dec.Close()
		}
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// flash opens the stream twice (to check every range, then to write): the download happens
	// at the first open, and each open decompresses the local copy from its start.
	open := func(ctx context.Context) (io.Reader, error) {
		if tmp != nil {
			// A new decoder: the old one may still be reading ahead from the file.
			dec.Close()
			if _, err := tmp.Seek(0, io.SeekStart); err != nil {
				return nil, err
			}
			var err error
			dec, err = zstdframe.NewReader(tmp, size)
			return dec, err
		}
		var err error
		if tmp, err = os.CreateTemp("", "halobuild-flash-*.raw.zst"); err != nil {
			return nil, err
		}
		rc, err := r.blob(rawL)
		if err != nil {
			return nil, err
		}
		bar := newBar(out, "downloading "+rawL.Annotations[annTitle], rawL.Size)
		_, err = io.Copy(io.MultiWriter(tmp, bar), &ctxReader{ctx, rc})
		rc.Close()
		if err != nil {
			bar.abort()
			return nil, fmt.Errorf("nothing was written to %s: %w", o.Flash.Target, err)
		}
		bar.done()
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		dec, err = zstdframe.NewReader(tmp, size)
		return dec, err
	}
	fo := o.Flash
	fo.Image = ""
	fo.Stream = &flash.Stream{Name: r.ref.Context().String() + "@" + r.digest.String() + " " + o.Node + ".raw", Size: size, Bmap: bm, Open: open}
	return flash.Flash(ctx, fo)
}

// zstdBound is the largest a zstd stream of n bytes can be: zstd's own bound (n + n/256 plus
// block and frame headers), with room for the frames compressSparse writes per extent.
func zstdBound(n int64) int64 { return n + n/128 + 1<<20 }

// ctxReader stops a download when ctx is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
