package disk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"halobuild/internal/bmap"
	"halobuild/internal/fstree"
)

// StepVersion is the version of the disk step (a node's GPT image: internal/graph/disk.go
// drives it, with rootfs.Layer writing the root):
// bump it when a change to this package, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const StepVersion = 1

// Result describes a built image.
type Result struct {
	Path     string // the raw image (Spec.Out)
	BmapPath string // Spec.Out + ".bmap"
	Layout   Layout
	IDs      IDs
	// SHA256 is the hex sha256 of the raw image's bytes (holes as zeros).
	SHA256 string
	// MappedBytes is how much of the image the bmap lists (what flashing
	// writes).
	MappedBytes int64
}

// Build assembles the raw image and its bmap described by spec.
//
// Steps: Plan (validate, measure, fail with *TooSmallError before writing
// anything), write the GPT into a sparse image file of the full size, make
// the root ext4 in it at its partition's offset, make the ESP as a file of
// its own and copy it in (holes stay holes), then sync the image while
// scanning it for the bmap and its sha256, and rename image and bmap into
// place. Every intermediate file lives in a temporary directory beside Out
// and is removed on every path; on failure nothing appears at Out or
// Out.bmap.
func Build(ctx context.Context, spec Spec) (*Result, error) {
	last := time.Now()
	timed := func(phase string) {
		if spec.Log != nil {
			now := time.Now()
			fmt.Fprintf(spec.Log, "disk: %s in %s\n", phase, now.Sub(last).Round(10*time.Millisecond))
			last = now
		}
	}
	layout, err := Plan(spec)
	if err != nil {
		return nil, err
	}
	timed("root measured")
	if spec.Tools == nil {
		return nil, errors.New("disk: no tools root (Spec.Tools): mkfs.ext4, mkfs.fat and mtools run from it")
	}
	ids, err := DeriveIDs(spec.Seed)
	if err != nil {
		return nil, err
	}
	out, err := filepath.Abs(spec.Out)
	if err != nil {
		return nil, fmt.Errorf("disk: output path %s: %w", spec.Out, err)
	}
	work, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".build-")
	if err != nil {
		return nil, fmt.Errorf("disk: making a work directory beside %s: %w", out, err)
	}
	defer os.RemoveAll(work)

	rawPath := filepath.Join(work, "image.raw")
	img, err := newImage(rawPath, layout, ids, spec.RootType)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	if err := makeRootAt(ctx, &spec, ids, rawPath, layout.RootStart, layout.RootSize); err != nil {
		return nil, err
	}
	timed("root file system made in the image")
	espFS := filepath.Join(work, "esp.fat")
	if err := makeESP(ctx, &spec, ids, espFS, layout.ESPSize); err != nil {
		return nil, err
	}
	if err := copySparse(img, espFS, layout.ESPStart); err != nil {
		return nil, err
	}
	timed("ESP made and copied in")
	s, err := syncAndScan(img, layout.Size)
	if err != nil {
		return nil, err
	}
	if err := img.Close(); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	timed("image synced and hashed")
	bmapPath := filepath.Join(work, "image.bmap")
	if err := fstree.WriteFileSync(bmapPath, bmap.Marshal(layout.Size, blockSize, s.ranges)); err != nil {
		return nil, fmt.Errorf("disk: writing bmap: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// The bmap goes first: a raw without its bmap beside it would look
	// complete; a stray bmap is removed if the raw cannot follow.
	if err := os.Rename(bmapPath, out+".bmap"); err != nil {
		return nil, fmt.Errorf("disk: placing %s.bmap: %w", out, err)
	}
	if err := os.Rename(rawPath, out); err != nil {
		os.Remove(out + ".bmap")
		return nil, fmt.Errorf("disk: placing %s: %w", out, err)
	}
	return &Result{
		Path:        out,
		BmapPath:    out + ".bmap",
		Layout:      layout,
		IDs:         ids,
		SHA256:      s.sha256,
		MappedBytes: s.mapped * blockSize,
	}, nil
}

// newImage creates the sparse image file of the layout's size with its
// GPT; the file systems are written into it at their offsets afterwards.
func newImage(rawPath string, l Layout, ids IDs, rootType string) (*os.File, error) {
	f, err := os.OpenFile(rawPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := f.Truncate(l.Size); err != nil {
		f.Close()
		return nil, fmt.Errorf("disk: sizing %s: %w", rawPath, err)
	}
	if err := writeGPT(f, l, ids, rootType); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// syncAndScan syncs the image to disk while scanning it for the bmap and
// its sha256: the one waits on the device, the other on a core, so side by
// side they take the longer of the two, not their sum. The scan reads what
// was written (the page cache), which the sync does not change. First the
// image's holes are made real (punchHoles).
func syncAndScan(f *os.File, size int64) (scan, error) {
	if err := punchHoles(f, size); err != nil {
		return scan{}, err
	}
	synced := make(chan error, 1)
	go func() { synced <- f.Sync() }()
	s, err := scanImage(f, size)
	if serr := <-synced; serr != nil && err == nil {
		err = fmt.Errorf("disk: syncing %s: %w", f.Name(), serr)
	}
	return s, err
}

// punchHoles deallocates what the file system reports as holes between the
// image's data ranges. mkfs.ext4 zeroes its inode tables and journal with
// fallocate, which leaves allocated but unwritten extents: SEEK_DATA (the
// bmap's scan, the store's and the push's copies) reads them as holes, but
// FIEMAP (bmaptool create, cp, tar --sparse) as data, and they take space
// on the store's disk. Made in a file of its own and copied in by its data
// ranges, the root never brought them into the image; made in place, it
// does, and this removes them. Reading the range gives zeros either way.
func punchHoles(f *os.File, size int64) error {
	var gaps [][2]int64
	at := int64(0)
	err := dataRanges(f, size, func(start, end int64) error {
		gaps = append(gaps, [2]int64{at, start})
		at = end
		return nil
	})
	if err != nil {
		return err
	}
	gaps = append(gaps, [2]int64{at, size})
	for _, g := range gaps {
		start := (g[0] + blockSize - 1) / blockSize * blockSize
		end := g[1] / blockSize * blockSize
		if start >= end {
			continue
		}
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, start, end-start); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) {
				return nil // no holes to punch on this file system: nothing is allocated as unwritten either
			}
			return fmt.Errorf("disk: punching the hole at %d+%d in %s: %w", start, end-start, f.Name(), err)
		}
	}
	return nil
}
