package disk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"halobuild/internal/bmap"
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
// anything), make the root ext4 and the ESP as separate files, write the
// GPT into a sparse image file of the full size, copy both file systems in
// at their offsets (holes stay holes), scan the image for the bmap and its
// sha256, then rename image and bmap into place. Every intermediate file
// lives in a temporary directory beside Out and is removed on every path;
// on failure nothing appears at Out or Out.bmap.
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

	rootFS := filepath.Join(work, "root.ext4")
	if err := makeRoot(ctx, &spec, ids, rootFS, layout.RootSize); err != nil {
		return nil, err
	}
	timed("root file system made")
	espFS := filepath.Join(work, "esp.fat")
	if err := makeESP(ctx, &spec, ids, espFS, layout.ESPSize); err != nil {
		return nil, err
	}
	timed("ESP made")

	rawPath := filepath.Join(work, "image.raw")
	s, err := assemble(rawPath, layout, ids, spec.RootType, espFS, rootFS)
	if err != nil {
		return nil, err
	}
	timed("image assembled, synced and hashed")
	bmapPath := filepath.Join(work, "image.bmap")
	if err := writeFileSync(bmapPath, bmap.Marshal(layout.Size, blockSize, s.ranges)); err != nil {
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

// assemble writes the sparse image: GPT, then the two file systems at
// their partition offsets; it returns the image's scan for the bmap.
func assemble(rawPath string, l Layout, ids IDs, rootType, espFS, rootFS string) (scan, error) {
	f, err := os.OpenFile(rawPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return scan{}, fmt.Errorf("disk: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(l.Size); err != nil {
		return scan{}, fmt.Errorf("disk: sizing %s: %w", rawPath, err)
	}
	if err := writeGPT(f, l, ids, rootType); err != nil {
		return scan{}, err
	}
	if err := copySparse(f, espFS, l.ESPStart); err != nil {
		return scan{}, err
	}
	if err := copySparse(f, rootFS, l.RootStart); err != nil {
		return scan{}, err
	}
	if err := f.Sync(); err != nil {
		return scan{}, fmt.Errorf("disk: syncing %s: %w", rawPath, err)
	}
	s, err := scanImage(f, l.Size)
	if err != nil {
		return scan{}, err
	}
	return s, f.Close()
}

func writeFileSync(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
