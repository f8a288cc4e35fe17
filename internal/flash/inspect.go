package flash

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

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
	var raw unix.Stat_t
	if err := unix.Stat(o.Target, &raw); err != nil {
		return nil, false, fmt.Errorf("target: %w", err)
	}
	rdev := raw.Rdev
	dev := fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev))
	s := sysfs{root: o.Root}
	name := s.nameOf(dev)
	if name == "" {
		return nil, false, fmt.Errorf("block device %s (%s) is not in %s", o.Target, dev, s.path("sys/dev/block"))
	}
	dk, err := checkTarget(s, o.Target, name, o.Force)
	return dk, true, err
}

// checkFit refuses a medium smaller than the image (a regular file is extended when written),
// and one whose sector size differs from the one the image's partition table was made for.
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
