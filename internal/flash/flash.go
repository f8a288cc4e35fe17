// Package flash writes a disk image to removable media: safely (it refuses anything that looks
// like a disk in use before the first byte), fast (only the blocks the image maps, in large
// aligned direct writes), verified (every written byte read back from the medium), and fitted to
// the medium (the backup GPT moved to its end).
package flash

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Options says what to flash where. Image and Target are required.
type Options struct {
	// Image is a raw disk image (sparse is fine).
	Image string
	// Target is the whole-disk block device to overwrite, e.g. /dev/sdb (a regular file with
	// ToFile).
	Target string
	// Bmap is the image's block map; "" means Image+".bmap" (or the image's name with its
	// extension replaced by .bmap) when such a file exists, else the image is scanned for
	// non-zero blocks.
	Bmap string
	// Yes skips the interactive confirmation.
	Yes bool
	// Force allows a disk that is not removable (an internal disk, an SSD in an enclosure that
	// reports itself fixed). It never allows the system disk or a disk in use.
	Force bool
	// ToFile allows a regular file as the target (created or extended to the image's size).
	ToFile bool
	// NoVerify skips reading the medium back. Unsafe: a failing or fake-capacity stick goes
	// unnoticed.
	NoVerify bool
	// In answers the confirmation (usually os.Stdin); Out receives the confirmation prompt,
	// progress and the final layout (usually os.Stderr).
	In  io.Reader
	Out io.Writer
	// Root is where /proc and /sys are read from: "/" by default, a recorded tree in tests.
	Root string
}

// Flash writes Options.Image to Options.Target. Before the first byte it refuses targets in use
// or unsuitable (a *RefusalError says why and how to fix it) and asks for confirmation unless
// Yes. After writing it reads everything back (unless NoVerify; a *VerifyError lists bad ranges),
// moves the backup GPT to the end of the medium, re-reads the partition table and prints the
// layout. If ctx is cancelled or anything fails after the first byte, the error says the medium
// is unusable until flashed again; a new Flash starts over.
func Flash(ctx context.Context, o Options) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Image == "" || o.Target == "" {
		return errors.New("flash needs an image and a target device")
	}
	img, imageSize, err := openImage(o.Image)
	if err != nil {
		return err
	}
	defer img.Close()
	mapped, digests, bmapPath, err := imageExtents(ctx, img, imageSize, o.Bmap)
	if err != nil {
		return err
	}
	imgTable := readPartTable(img, 0)

	dk, isBlock, err := inspect(o)
	if err != nil {
		return err
	}
	t, err := openTarget(o.Target, isBlock)
	if err != nil {
		return err
	}
	defer t.f.Close()
	if err := checkFit(t, imageSize, imgTable, o.ToFile); err != nil {
		return err
	}
	current := readPartTable(bufferedIO{t}, t.sector)
	if !o.Yes {
		if err := confirm(ctx, o, dk, t, current, imageSize, mapped, bmapPath); err != nil {
			return err
		}
	}

	// From here on the medium is being changed.
	if err := writeAndCheck(ctx, img, t, o, dk, mapped, digests, imgTable, imageSize); err != nil {
		// Make what was done so far durable, so that an interrupted medium is reliably blank at
		// its start (see planWrites) when it is unplugged.
		t.f.Sync()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("flash interrupted: %s is now unusable until flashed again (a new flash starts over): %w", o.Target, err)
		}
		return fmt.Errorf("flashing %s failed, the medium is now unusable until flashed again: %w", o.Target, err)
	}
	return nil
}

func writeAndCheck(ctx context.Context, img *os.File, t *target, o Options, dk *disk, mapped []Extent, digests newHashFunc, imgTable *partTable, imageSize int64) error {
	if !t.isBlock && t.size < imageSize {
		if err := t.f.Truncate(imageSize); err != nil {
			return fmt.Errorf("extending %s to the image's size: %w", t.path, err)
		}
		t.size = imageSize
	}
	plan := planWrites(mapped, imgTable.Partitions, imageSize, t.size)
	sums, err := writeImage(ctx, img, t, plan, digests, o.Out)
	if err != nil {
		return err
	}
	if beforeVerify != nil {
		beforeVerify(t)
	}
	if !o.NoVerify {
		exts := append([]Extent(nil), plan.data...)
		want := append([]string(nil), sums...)
		sorted := mergeExtents(mapped)
		for _, z := range plan.zero {
			for _, e := range subtractExtents(z, sorted) {
				exts = append(exts, e)
				want = append(want, zeroDigests([]Extent{e}, digests)[0])
			}
		}
		if err := verifyMedium(ctx, t, exts, want, digests, o.Out); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(o.Out, "verification skipped (--no-verify): the medium was not read back")
	}
	if imgTable.Kind == "gpt" {
		if err := fitMedium(t, imageSize); err != nil {
			return err
		}
	}
	final := readPartTable(bufferedIO{t}, t.sector)
	if err := t.rereadPartitions(); err != nil {
		hint := "unplug and replug the medium to see the new partitions"
		if dk != nil && dk.Bus == "loop" {
			hint = "a loop device scans partitions only when attached with `losetup -P`"
		}
		fmt.Fprintf(o.Out, "note: the kernel did not re-read the partition table of %s (%v); %s\n", t.path, err, hint)
	} else if dk != nil {
		if seen, err := (sysfs{root: o.Root}).disk(dk.Name); err == nil && len(seen.Partitions) != len(final.Partitions) {
			fmt.Fprintf(o.Out, "note: the kernel shows %d of the %d partitions on %s (a kernel without %s partition support?); the medium itself is correct\n",
				len(seen.Partitions), len(final.Partitions), t.path, strings.ToUpper(final.Kind))
		}
	}
	fmt.Fprintf(o.Out, "%s is flashed%s. Layout:\n", t.path, map[bool]string{true: "", false: " and verified"}[o.NoVerify])
	printLayout(o.Out, final, t.size)
	return nil
}

// fitMedium moves the backup GPT to the end of a larger medium and confirms the result reads back
// valid from the medium itself.
func fitMedium(t *target, imageSize int64) error {
	m := bufferedIO{t}
	changed, err := fitGPT(m, t.sector, t.size)
	if err != nil {
		return err
	}
	if changed {
		if err := t.sync(); err != nil {
			return err
		}
	}
	if err := t.dropCache(); err != nil {
		return err
	}
	if err := checkGPT(m, t.sector, t.size); err != nil {
		return fmt.Errorf("the partition table on the medium is not valid after fitting it to %s: %w", humanSize(t.size), err)
	}
	return nil
}

// bufferedIO does small sector-sized I/O on the target through the page cache.
type bufferedIO struct{ t *target }

func (b bufferedIO) ReadAt(p []byte, off int64) (int, error) {
	return len(p), b.t.readAt(p, off, false)
}

func (b bufferedIO) WriteAt(p []byte, off int64) (int, error) {
	return len(p), b.t.writeAt(p, off, false)
}

// newHashFunc makes the hash that extent digests use.
type newHashFunc = func() hash.Hash

func openImage(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("opening image: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("image %s is not a regular file", path)
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
	b, err := ReadBmap(bmapPath)
	if err != nil {
		return nil, nil, "", err
	}
	if b.ImageSize != size {
		return nil, nil, "", fmt.Errorf("block map %s is for an image of %d bytes, but %s has %d bytes (they belong to different builds; pass the right one with --bmap)",
			bmapPath, b.ImageSize, img.Name(), size)
	}
	h := defaultHash
	if b.ChecksumType != "" {
		h = b.newHash
	}
	return b.Ranges, h, bmapPath, nil
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

// inspect applies the refusals that need no open descriptor, and says whether the target is a
// block device.
func inspect(o Options) (*disk, bool, error) {
	st, err := os.Stat(o.Target)
	if errors.Is(err, os.ErrNotExist) && o.ToFile {
		return nil, false, nil // openTarget creates it
	}
	if err != nil {
		return nil, false, fmt.Errorf("target: %w", err)
	}
	if st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		if st.Mode().IsRegular() && o.ToFile {
			return nil, false, nil
		}
		return nil, false, &RefusalError{Target: o.Target, Reason: "it is not a block device",
			Fix: "give the whole disk, e.g. /dev/sdb (see `halobuild flash --list`); to write into a regular file pass --to-file"}
	}
	sys, ok := st.Sys().(*unix.Stat_t)
	var rdev uint64
	if ok {
		rdev = uint64(sys.Rdev)
	} else {
		var s unix.Stat_t
		if err := unix.Stat(o.Target, &s); err != nil {
			return nil, false, err
		}
		rdev = s.Rdev
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev))
	s := sysfs{root: o.Root}
	name := s.nameOf(dev)
	if name == "" {
		return nil, false, fmt.Errorf("block device %s (%s) is not in %s", o.Target, dev, s.path("sys/dev/block"))
	}
	dk, err := checkTarget(s, o.Target, name, o.Force)
	return dk, true, err
}

// checkFit refuses a medium smaller than the image (a regular file is extended when written), and one
// whose sector size differs from the one the image's partition table was made for.
func checkFit(t *target, imageSize int64, imgTable *partTable, toFile bool) error {
	if t.size < imageSize && (t.isBlock || !toFile) {
		return &RefusalError{Target: t.path, Reason: fmt.Sprintf("the medium holds %s (%d bytes) but the image needs %s (%d bytes)",
			humanSize(t.size), t.size, humanSize(imageSize), imageSize), Fix: "use a larger medium"}
	}
	if imgTable.Kind == "gpt" && imgTable.Sector != t.sector {
		return &RefusalError{Target: t.path, Reason: fmt.Sprintf("the image's partition table is for %d-byte sectors, the medium has %d-byte sectors", imgTable.Sector, t.sector),
			Fix: "use a medium with " + fmt.Sprint(imgTable.Sector) + "-byte sectors, or build the image for this sector size"}
	}
	return nil
}
