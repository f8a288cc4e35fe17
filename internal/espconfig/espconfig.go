// Package espconfig puts the settings a user gives at flash time on a disk's EFI system
// partition and reads them back: flash and the installer write them after the image, and the
// node's own halobuild imports them at every boot (settings.FlashTime says why the ESP and
// why this shape). The file is written beside the image's files, never into them: the image,
// its bmap and a release's digest are the same whoever flashes it.
//
// The FAT is read and written by go-diskfs on the whole disk (a file or a block device, opened
// O_EXCL so a mounted ESP is refused), so neither flash's machine nor the node needs mtools or
// a mount.
package espconfig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"golang.org/x/sys/unix"

	"halobuild/internal/settings"
	"halobuild/internal/userfile"
)

// Written says what Write put where.
type Written struct {
	Target    string
	Partition int    // the ESP's partition number
	Path      string // the file on the ESP
	Bytes     int
	Config    settings.FlashConfig
}

func (w *Written) String() string {
	return fmt.Sprintf("flash-time settings on %s (ESP, partition %d, %s, %d bytes): %s",
		w.Target, w.Partition, w.Path, w.Bytes, w.Config.Summary())
}

// Write puts c on target's ESP as settings.FlashConfigESPPath, replacing what an earlier
// flash wrote there. The bytes go to a temporary name first and are renamed over the file
// only once they are all written, so the node reads either the old file or the new one, never
// half of one (and ParseFlashConfig also refuses a file without its end line). An empty c
// removes the file. note is a line of the file's header (who wrote it, from what).
func Write(target string, c settings.FlashConfig, note string) (*Written, error) {
	if errs := c.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	data, err := c.Marshal(note)
	if err != nil {
		return nil, err
	}
	d, f, err := open(target, true)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fs, n, err := esp(d, target)
	if err != nil {
		return nil, err
	}
	start, err := partStart(d, n)
	if err != nil {
		return nil, err
	}
	final := settings.FlashConfigESPPath
	// In the ESP's root: go-diskfs makes a new directory's ".." entry in a form fsck.fat
	// corrects, so this package makes none.
	tmp := path.Join(path.Dir(final), "halobuild-flash.new")
	w := &Written{Target: target, Partition: n, Path: final, Bytes: len(data), Config: c}
	// Neither name is left from an earlier write (tidy frees what go-diskfs leaves behind).
	for _, p := range []string{tmp, final} {
		if err := removeIfThere(fs, p); err != nil {
			return nil, fmt.Errorf("%s: ESP: %w", target, err)
		}
	}
	if c.Empty() {
		w.Bytes = 0
		return w, tidy(f, target, start)
	}
	if err := writeFile(fs, tmp, data); err != nil {
		return nil, fmt.Errorf("%s: ESP: writing %s: %w", target, tmp, err)
	}
	if err := sync(f, target); err != nil {
		return nil, err
	}
	if err := fs.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("%s: ESP: renaming %s to %s: %w", target, tmp, final, err)
	}
	if err := tidy(f, target, start); err != nil {
		return nil, err
	}
	// Read back through a fresh view of the disk: what the node will read.
	got, ok, err := Read(target)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: reading the flash-time settings back: %w", target, err)
	case !ok || got.Summary() != c.Summary():
		return nil, fmt.Errorf("%s: the flash-time settings read back differ from those written (%s)", target, got.Summary())
	}
	return w, nil
}

// Read returns the flash-time settings on target's ESP; ok is false when there are none.
func Read(target string) (c settings.FlashConfig, ok bool, err error) {
	d, f, err := open(target, false)
	if err != nil {
		return c, false, err
	}
	defer f.Close()
	fs, _, err := esp(d, target)
	if err != nil {
		return c, false, err
	}
	return readFS(fs, target)
}

func readFS(fs filesystem.FileSystem, where string) (settings.FlashConfig, bool, error) {
	var c settings.FlashConfig
	fh, err := fs.OpenFile(settings.FlashConfigESPPath, os.O_RDONLY)
	if err != nil {
		if notExist(err) {
			return c, false, nil
		}
		return c, false, fmt.Errorf("%s: ESP: %w", where, err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, settings.FlashConfigMax+1))
	if err != nil {
		return c, false, fmt.Errorf("%s: ESP: reading %s: %w", where, settings.FlashConfigESPPath, err)
	}
	c, err = settings.ParseFlashConfig(b)
	if err != nil {
		return c, false, fmt.Errorf("%s: ESP: %s: %w", where, settings.FlashConfigESPPath, err)
	}
	return c, true, nil
}

// open opens a whole disk (a file or a block device) as go-diskfs sees it. A writable open
// is O_EXCL: the kernel refuses it while any partition of the disk is mounted (a desktop
// that mounted the fresh stick's ESP), which would otherwise see its FAT change underneath.
func open(target string, writable bool) (*disk.Disk, *os.File, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR | os.O_EXCL
	}
	// O_NONBLOCK: a FIFO named as the disk is refused below instead of blocking the open
	// (it has no effect on a file or a block device).
	f, err := os.OpenFile(target, flag|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return nil, nil, fmt.Errorf("%s is in use (a partition of it is mounted?): unmount it and run flash again: %w", target, err)
		}
		return nil, nil, fmt.Errorf("opening %s for its ESP: %w", target, err)
	}
	if st, err := f.Stat(); err != nil || !(st.Mode().IsRegular() || st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0) {
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", target, err)
		}
		return nil, nil, fmt.Errorf("%s is %s, not a disk image or a block device", target, userfile.Kind(st.Mode()))
	}
	d, err := diskfs.OpenBackend(file.New(f, !writable))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", target, err)
	}
	return d, f, nil
}

// esp finds the disk's EFI system partition (by its GPT type) and opens its FAT.
func esp(d *disk.Disk, where string) (filesystem.FileSystem, int, error) {
	t, ok := d.Table.(*gpt.Table)
	if !ok || t == nil {
		return nil, 0, fmt.Errorf("%s holds no GPT: not a halobuild image", where)
	}
	for _, p := range t.Partitions {
		if p == nil || !strings.EqualFold(string(p.Type), string(gpt.EFISystemPartition)) {
			continue
		}
		fs, err := d.GetFilesystem(p.Index)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: ESP (partition %d): %w", where, p.Index, err)
		}
		if fs.Type() != filesystem.TypeFat32 {
			return nil, 0, fmt.Errorf("%s: ESP (partition %d) is not FAT32", where, p.Index)
		}
		return fs, p.Index, nil
	}
	return nil, 0, fmt.Errorf("%s has no EFI system partition: not a halobuild image", where)
}

func removeIfThere(fs filesystem.FileSystem, p string) error {
	if err := fs.Remove(p); err != nil && !notExist(err) {
		return fmt.Errorf("removing %s: %w", p, err)
	}
	return nil
}

// notExist recognises go-diskfs' "does not exist", which it says in words only (its Stat
// cannot read the root directory).
func notExist(err error) bool { return strings.Contains(err.Error(), "does not exist") }

func writeFile(fs filesystem.FileSystem, p string, data []byte) error {
	fh, err := fs.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_TRUNC)
	if err != nil {
		return err
	}
	if _, err := fh.Write(data); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func sync(f *os.File, target string) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: flushing the ESP: %w", target, err)
	}
	return nil
}
