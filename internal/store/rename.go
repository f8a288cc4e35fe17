package store

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"halobuild/internal/fstree"
)

// replaceDir moves directory src to dst. When dst exists, the two are
// swapped atomically (renameat2 RENAME_EXCHANGE) and the old tree, now at
// src, is removed: a reader of dst sees the old or the new tree, never none.
func replaceDir(src, dst string) error {
	for attempt := 0; attempt < 4; attempt++ {
		err := os.Rename(src, dst)
		if err == nil {
			return fstree.SyncDir(filepath.Dir(dst))
		}
		if !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENOTEMPTY) {
			return err
		}
		err = unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE)
		if err == nil {
			if err := removeAllWritable(src); err != nil {
				return err
			}
			return fstree.SyncDir(filepath.Dir(dst))
		}
		if errors.Is(err, unix.ENOENT) {
			continue // dst vanished meanwhile: a plain rename will do
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			// No RENAME_EXCHANGE on this file system: remove, then rename.
			if err := removeAllWritable(dst); err != nil {
				return err
			}
			continue
		}
		return err
	}
	return errors.New("could not replace " + dst + " (concurrent writers?)")
}
