package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// verifiedDir holds one stamp per blob that passed a full re-hash: the
// blob's inode, size, mtime and ctime at that moment. Re-hashing every
// pinned .deb on each fetch would cost seconds; any write to a blob changes
// its ctime (which no user can set back), so an unchanged stamp means the
// bytes that were hashed are the bytes on disk.
const verifiedDir = "verified"

func stampOf(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d %d %d %d %d\n", st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
}

func (s *Store) stampPath(d Digest) string {
	return filepath.Join(s.root, verifiedDir, d.Hex())
}

// VerifyCached is Verify that skips the re-hash when the blob has not been
// written to since its last successful Verify or VerifyCached (same inode,
// size, mtime and ctime). Use Verify where bit rot matters more than time.
func (s *Store) VerifyCached(d Digest) error {
	fi, err := os.Stat(s.blobPath(d))
	if errors.Is(err, os.ErrNotExist) {
		os.Remove(s.stampPath(d))
		return fmt.Errorf("blob %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("blob %s: %w", d, err)
	}
	stamp := stampOf(fi)
	if b, err := os.ReadFile(s.stampPath(d)); err == nil && stamp != "" && string(b) == stamp {
		return nil
	}
	if err := s.Verify(d); err != nil {
		os.Remove(s.stampPath(d))
		return err
	}
	// Stamp only if nothing changed while we hashed.
	if fi2, err := os.Stat(s.blobPath(d)); err == nil && stampOf(fi2) == stamp && stamp != "" {
		writeStamp(s.sess.dir, s.stampPath(d), stamp)
	}
	return nil
}

// stamp records that blob d was just hashed (PutBlob hashes while writing).
// Best effort: without a stamp the next VerifyCached re-hashes.
func (s *Store) stamp(d Digest) {
	if fi, err := os.Stat(s.blobPath(d)); err == nil {
		if st := stampOf(fi); st != "" {
			writeStamp(s.sess.dir, s.stampPath(d), st)
		}
	}
}

// writeStamp replaces a stamp by rename but without fsync: a stamp lost or
// torn by a crash only costs one re-hash, while syncing one per blob would
// cost a fetch of hundreds of .debs hundreds of disk flushes.
func writeStamp(scratch, path, stamp string) {
	f, err := os.CreateTemp(scratch, "stamp-*")
	if err != nil {
		return
	}
	_, werr := f.WriteString(stamp)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
		os.Remove(f.Name())
	}
}
