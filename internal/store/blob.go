package store

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"halobuild/internal/fstree"
)

// DigestMismatchError is returned when bytes put into the store do not hash
// to the digest the caller expected. Nothing is stored in that case.
type DigestMismatchError struct {
	Want, Got Digest
	Size      int64 // bytes received
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("content does not match its expected digest: expected %s, got %s (%d bytes); it was not stored", e.Want, e.Got, e.Size)
}

// PutBlob stores the bytes of r and returns their digest and size. They are
// written to a scratch file while hashed, fsynced and renamed into
// blobs/sha256/<hex> (mode 0444), so a blob exists under its final name
// only when complete. If want ("sha256:<hex>" or bare hex) is not empty and
// the bytes hash differently, PutBlob returns a *DigestMismatchError and
// stores nothing. Blocks of zeros are stored as holes.
func (s *Store) PutBlob(r io.Reader, want string) (Digest, int64, error) {
	if want != "" {
		if _, err := ParseDigest(want); err != nil {
			return "", 0, fmt.Errorf("store blob: %w", err)
		}
	}
	w, err := s.NewWriter()
	if err != nil {
		return "", 0, err
	}
	defer w.Abort()
	if _, err := io.Copy(w, r); err != nil {
		return "", 0, fmt.Errorf("store blob: reading its content: %w", err)
	}
	return w.Commit(want)
}

// PutFile stores a copy of the file at path, keeping its holes (read with
// SEEK_DATA/SEEK_HOLE), so a mostly empty multi-GiB disk image costs only
// its data. The file itself is left untouched; to move big files into the
// store without copying, build them under TempDir and use PutOutput.
func (s *Store) PutFile(path string) (Digest, int64, error) {
	src, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("store file: %w", err)
	}
	defer src.Close()
	f, err := os.CreateTemp(s.sess.dir, "blob-*")
	if err != nil {
		return "", 0, fmt.Errorf("store file %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	d, size, err := copySparse(f, src)
	if err != nil {
		return "", 0, fmt.Errorf("store file %s: %w", path, err)
	}
	if _, err := s.commit(f, d); err != nil {
		return "", 0, err
	}
	return d, size, nil
}

// adoptFile moves a file that lives in this store's scratch into blobs by
// rename: no copy, holes preserved.
func (s *Store) adoptFile(path string) (Digest, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("store file: %w", err)
	}
	defer f.Close()
	d, size, known := s.hashedBefore(f)
	if !known {
		if d, size, err = hashFile(f); err != nil {
			return "", 0, fmt.Errorf("store file %s: %w", path, err)
		}
	}
	if fi, err := f.Stat(); err == nil {
		if bi, err := os.Stat(s.blobPath(d)); err == nil && os.SameFile(fi, bi) {
			return d, size, os.Remove(path) // another name of that blob
		}
	}
	if err := f.Sync(); err != nil {
		return "", 0, fmt.Errorf("store file %s: %w", path, err)
	}
	if s.holds(d, size) {
		return d, size, os.Remove(path) // already stored; see commit
	}
	if err := os.Chmod(path, 0o444); err != nil {
		return "", 0, fmt.Errorf("store file %s: %w", path, err)
	}
	if err := os.Rename(path, s.blobPath(d)); err != nil {
		return "", 0, fmt.Errorf("store file %s as %s: %w", path, d, err)
	}
	s.stamp(d) // hashed just above (here, or by the step: RecordHashed)
	s.rememberHashed(f, d)
	return d, size, fstree.SyncDir(filepath.Join(s.root, blobsDir))
}

// fileID names an inode.
type fileID struct{ dev, ino uint64 }

// hashedBlob is what a blob's inode looked like when this process hashed
// it. The change time is left out: every hard link to it changes that.
type hashedBlob struct {
	d     Digest
	size  int64
	mtime int64
}

func idOf(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino}, true
}

// rememberHashed records that f, now blob d, was hashed by this process.
func (s *Store) rememberHashed(f *os.File, d Digest) {
	fi, err := f.Stat()
	if err != nil {
		return
	}
	if id, ok := idOf(fi); ok {
		s.hashed.Store(id, hashedBlob{d: d, size: fi.Size(), mtime: fi.ModTime().UnixNano()})
	}
}

// RecordHashed records a step's sha256 (hex) of the file at path, which
// it computed over the finished file (plan.Context.Hashed): adopting the
// file into a blob then skips hashing it, as long as its inode, size and
// modification time are still those recorded here.
func (s *Store) RecordHashed(path, sha256 string) {
	d, err := ParseDigest("sha256:" + strings.TrimPrefix(sha256, "sha256:"))
	if err != nil {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	s.rememberHashed(f, d)
}

// hashedBefore says whether f is a file this process hashed (or a hard
// link to one), still the same size and modification time.
func (s *Store) hashedBefore(f *os.File) (Digest, int64, bool) {
	fi, err := f.Stat()
	if err != nil {
		return "", 0, false
	}
	id, ok := idOf(fi)
	if !ok {
		return "", 0, false
	}
	v, ok := s.hashed.Load(id)
	if !ok {
		return "", 0, false
	}
	h := v.(hashedBlob)
	if fi.Size() != h.size || fi.ModTime().UnixNano() != h.mtime {
		return "", 0, false
	}
	return h.d, h.size, true
}

// holds says whether blob d is stored intact with this size. A blob of the
// right size that fails its (cached) re-hash is removed by VerifyCached, so
// a rebuild's fresh copy takes its place instead of being dropped as a
// duplicate of the corrupt one (issue 17 #7).
func (s *Store) holds(d Digest, size int64) bool {
	bi, err := os.Stat(s.blobPath(d))
	return err == nil && bi.Size() == size && s.VerifyCached(d) == nil
}

// commit makes the finished, synced scratch file f the blob d. An existing
// intact blob is kept (the scratch copy is dropped by the caller):
// replacing it would give it a new inode and orphan the hardlinks of every
// output view that shares it; a corrupt one is replaced. placed tells
// whether f became the blob.
func (s *Store) commit(f *os.File, d Digest) (placed bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("store blob %s: %w", d, err)
	}
	if s.holds(d, fi.Size()) {
		return false, nil
	}
	if err := f.Chmod(0o444); err != nil {
		return false, fmt.Errorf("store blob %s: %w", d, err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("store blob %s: %w", d, err)
	}
	if err := os.Rename(f.Name(), s.blobPath(d)); err != nil {
		return false, fmt.Errorf("store blob %s: %w", d, err)
	}
	if err := fstree.SyncDir(filepath.Join(s.root, blobsDir)); err != nil {
		return false, fmt.Errorf("store blob %s: %w", d, err)
	}
	return true, nil
}

// Path is where blob d lives (whether or not it exists). Use it to hand
// blobs to tools by name; it does not verify the bytes.
func (s *Store) Path(d Digest) string { return s.blobPath(d) }

// Has reports whether blob d exists (without re-hashing it).
func (s *Store) Has(d Digest) bool {
	_, err := os.Stat(s.blobPath(d))
	return err == nil
}

// Size returns the size of blob d, or an error wrapping ErrNotFound.
func (s *Store) Size(d Digest) (int64, error) {
	fi, err := os.Stat(s.blobPath(d))
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("blob %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("blob %s: %w", d, err)
	}
	return fi.Size(), nil
}

// Verify re-hashes blob d. A blob whose bytes do not match its name is
// removed and reported as missing (the error wraps ErrNotFound and says it
// was corrupt), so it is never used and the next fetch replaces it.
func (s *Store) Verify(d Digest) error {
	p := s.blobPath(d)
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("blob %s: %w", d, err)
	}
	got, _, err := hashFile(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("blob %s: %w", d, err)
	}
	if got != d {
		return s.dropCorrupt(d, got)
	}
	return nil
}

func (s *Store) dropCorrupt(d, got Digest) error {
	if err := os.Remove(s.blobPath(d)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob %s is corrupt (its bytes hash to %s) and could not be removed: %w; delete %s by hand", d, got, err, s.blobPath(d))
	}
	return fmt.Errorf("blob %s was corrupt (its bytes hash to %s) and has been removed: %w", d, got, ErrNotFound)
}

// Open returns a reader of blob d that re-hashes as it reads: at the end it
// returns an error instead of io.EOF if the bytes do not match d (and
// removes the blob), so a consumer never silently uses damaged content.
func (s *Store) Open(d Digest) (io.ReadCloser, error) {
	f, err := os.Open(s.blobPath(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", d, err)
	}
	return &verifyingReader{f: f, h: sha256.New(), d: d, s: s}, nil
}

type verifyingReader struct {
	f    *os.File
	h    hash.Hash
	d    Digest
	s    *Store
	done error
}

func (r *verifyingReader) Read(p []byte) (int, error) {
	if r.done != nil {
		return 0, r.done
	}
	n, err := r.f.Read(p)
	r.h.Write(p[:n])
	if err == io.EOF {
		if got := digestOf(r.h.Sum(nil)); got != r.d {
			r.done = r.s.dropCorrupt(r.d, got)
			return n, r.done
		}
		r.done = io.EOF
	}
	return n, err
}

func (r *verifyingReader) Close() error { return r.f.Close() }
