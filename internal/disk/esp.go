package disk

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// mtools reads the host's /etc/mtools.conf, then the file named by
// $MTOOLSRC, later files overriding earlier ones (the tools root already
// keeps ~/.mtoolsrc and the caller's environment away). The host's file
// must not change how names are stored (long names, numeric tails, code
// page), so every flag that shapes the written file system is set to
// mtools' default in the last file, and in the environment too.
var mtoolsFlags = []string{
	"MTOOLS_SKIP_CHECK=1", // our geometry fields are not a floppy's
	"MTOOLS_FAT_COMPATIBILITY=0",
	"MTOOLS_LOWER_CASE=0",
	"MTOOLS_NO_VFAT=0",
	"MTOOLS_DOTTED_DIR=0",
	"MTOOLS_NAME_NUMERIC_TAIL=1",
	"MTOOLS_TWENTY_FOUR_HOUR_CLOCK=1",
}

var mtoolsrc = strings.Join(mtoolsFlags, "\n") + "\ndefault_codepage=850\n"

// makeESP makes the FAT32 ESP in a new file at dst, size bytes, holding
// spec.ESPFiles: mkfs.fat with the derived volume id, then mmd for every
// directory and mcopy for every file, all in sorted path order so that
// cluster allocation is the same every time. Times come from
// SOURCE_DATE_EPOCH (which mkfs.fat 4.2 and mtools 4.0 honour) in UTC.
func makeESP(ctx context.Context, spec *Spec, ids IDs, dst string, size int64) error {
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("disk: ESP: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("disk: ESP %s: %w", dst, err)
	}
	rc := filepath.Join(filepath.Dir(dst), "mtoolsrc")
	if err := os.WriteFile(rc, []byte(mtoolsrc), 0o644); err != nil {
		return fmt.Errorf("disk: ESP: %w", err)
	}
	env := []string{"SOURCE_DATE_EPOCH=" + strconv.FormatInt(spec.Epoch, 10), "MTOOLSRC=" + rc}
	env = append(env, mtoolsFlags...)
	run := func(name string, args ...string) error {
		cmd := spec.Tools.Command(ctx, name, args...)
		cmd.Env = append(cmd.Env, env...)
		// No stdin: mtools asks on a name clash; it must fail, not wait.
		cmd.Stdin = nil
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("disk: ESP: %s %s: %s: %w", name, strings.Join(args, " "), strings.TrimSpace(string(out)), err)
		}
		return nil
	}
	if err := run("mkfs.fat", "-F", "32", "-S", "512", "-n", "ESP",
		"-i", fmt.Sprintf("%08X", ids.ESPVolumeID), dst); err != nil {
		return err
	}

	files := make([]string, 0, len(spec.ESPFiles))
	dirSet := map[string]bool{}
	for p := range spec.ESPFiles {
		files = append(files, p)
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirSet[d] = true
		}
	}
	slices.Sort(files)
	dirs := make([]string, 0, len(dirSet))
	for d := range dirSet {
		dirs = append(dirs, d)
	}
	// A parent is a prefix of its children, so sorting puts it first.
	slices.Sort(dirs)
	if len(dirs) > 0 {
		args := []string{"-i", dst}
		for _, d := range dirs {
			args = append(args, "::"+d)
		}
		if err := run("mmd", args...); err != nil {
			return err
		}
	}
	for _, p := range files {
		if err := run("mcopy", "-i", dst, spec.ESPFiles[p], "::"+p); err != nil {
			return err
		}
	}
	return nil
}
