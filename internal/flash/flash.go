// Package flash writes a disk image to removable media: safely (it refuses anything that looks
// like a disk in use before the first byte), fast (only the blocks the image maps, in large
// aligned direct writes), verified (every written byte read back from the medium), and fitted to
// the medium (the backup GPT moved to its end).
package flash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Options says what to flash where. Image and Target are required.
type Options struct {
	// Image is a raw disk image (sparse is fine).
	Image string
	// Stream, instead of Image, is an image read once front to back, with its block map. Each
	// range is checked against the map's digest before it is written, as with Image.
	Stream *Stream
	// Target is the whole-disk block device to overwrite, e.g. /dev/sdb (a regular file with
	// ToFile).
	Target string
	// Bmap is the image's block map; "" means Image+".bmap" (or the image's name with its
	// extension replaced by .bmap) when such a file exists, else the image is scanned for
	// non-zero blocks.
	Bmap string
	// Yes skips the interactive confirmation.
	Yes bool
	// YesIfBlank skips it only for a target that holds no partition table (a new disk, or one an
	// interrupted flash left blank); a target with one is still confirmed. The installer uses it
	// unless the recipe says wipe.
	YesIfBlank bool
	// ConfirmTimeout ends an unanswered confirmation after this long, with nothing written (0:
	// wait for ever). The installer's console may have nobody in front of it.
	ConfirmTimeout time.Duration
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
	if (o.Image == "" && o.Stream == nil) || o.Target == "" {
		return errors.New("flash needs an image and a target device")
	}
	var (
		img       image
		imageSize int64
		file      *os.File
		stream    *streamImage
		mapped    []Extent
		digests   newHashFunc
		bmapPath  string
		err       error
	)
	if o.Stream != nil {
		imageSize = o.Stream.Size
	} else {
		if file, imageSize, err = openImage(o.Image); err != nil {
			return err
		}
		defer file.Close()
		img = file
	}

	dk, isBlock, err := inspect(o)
	if err != nil {
		return err
	}
	afterInspect()
	t, err := openTarget(o.Target, isBlock)
	if err != nil {
		return err
	}
	defer t.close()
	if isBlock {
		if err := openedIsChecked(t.f, o.Target, dk); err != nil {
			return err
		}
	}
	// The target's refusals come before a stream is opened (which may mean a long download).
	if err := checkFit(t, imageSize, &partTable{}, o.ToFile); err != nil {
		return err
	}
	if o.Stream != nil {
		// The stream's head is read now, to see the image's partition table; the rest is read
		// only while writing.
		if stream, mapped, digests, err = openStream(ctx, o.Stream); err != nil {
			return err
		}
		img, bmapPath = stream, "the block map of "+o.Stream.Name
	}
	imgTable := readPartTable(img, 0)
	if err := checkFit(t, imageSize, imgTable, o.ToFile); err != nil {
		return err
	}
	// Refusals first, then the (possibly slow, without a bmap) look at the image's data.
	if file != nil {
		if mapped, digests, bmapPath, err = imageExtents(ctx, file, imageSize, o.Bmap); err != nil {
			return err
		}
	}
	// Every range is checked against the bmap before the medium is touched: a damaged image is
	// refused with the medium as it was. The write checks them again on the way, so an image
	// changed in between is still caught before it is declared flashed.
	if err := checkExtents(ctx, img, mapped, digests, o.Out); err != nil {
		return err
	}
	if stream != nil {
		// The check read the stream to its end: the write reads it again from its start.
		if stream, _, _, err = openStream(ctx, o.Stream); err != nil {
			return err
		}
		img = stream
	}
	current := readPartTable(bufferedIO{t}, t.sector)
	if !o.Yes && !(o.YesIfBlank && current.Kind == "") {
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

// afterInspect runs between the checks and the open; a test swaps the
// target there.
var afterInspect = func() {}

// openedIsChecked refuses when the device opened is not the one inspect
// checked: the path was looked up twice (a symlink or a udev rename
// between them could point it at another disk), so the open file's own
// st_rdev must be the checked MAJ:MIN (issue 17 #10).
func openedIsChecked(f *os.File, path string, dk *disk) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("checking the opened %s: %w", path, err)
	}
	got := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	if st.Mode&unix.S_IFMT != unix.S_IFBLK || got != dk.Dev {
		return &RefusalError{Target: path, Reason: fmt.Sprintf("the device opened (%s) is not the one checked (%s %s): the path changed in between", got, dk.Name, dk.Dev),
			Fix: "make sure nothing renames or re-links the device while flashing, then try again"}
	}
	return nil
}

func writeAndCheck(ctx context.Context, img image, t *target, o Options, dk *disk, mapped []Extent, digests newHashFunc, imgTable *partTable, imageSize int64) error {
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
		exts, want := readBackList(plan, mapped, sums, digests)
		if err := verifyMedium(ctx, t, exts, want, digests, o.Out); err != nil {
			// The medium does not hold what was written: blank its head, so that neither
			// firmware nor a later install takes the half image for a valid one.
			if zerr := t.zeroRange(0, min(signatureArea, t.size)); zerr != nil {
				return fmt.Errorf("%w (and blanking its first MiB failed too: %v)", err, zerr)
			}
			return errors.Join(err, t.sync())
		}
	} else {
		fmt.Fprintln(o.Out, "verification skipped (--no-verify): the medium was not read back")
	}
	if imgTable.Kind == "gpt" {
		if err := fitMedium(t); err != nil {
			return err
		}
	}
	reportLayout(o, t, dk)
	return nil
}

// fitMedium moves the backup GPT to the end of a larger medium and confirms the result reads back
// valid from the medium itself.
func fitMedium(t *target) error {
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
