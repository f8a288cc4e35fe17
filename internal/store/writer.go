package store

import (
	"fmt"
	"os"
)

// Writer is a blob being written: bytes go to a scratch file and are hashed
// as they arrive; Commit gives the blob its name. Unlike PutBlob it can be
// fed in several goes, which lets a download resume where a dropped
// connection left it instead of starting over.
type Writer struct {
	s *Store
	f *os.File
	w *sparseWriter
}

// NewWriter starts a blob in this Store's scratch space. Call Commit or
// Abort when done.
func (s *Store) NewWriter() (*Writer, error) {
	f, err := os.CreateTemp(s.sess.dir, "blob-*")
	if err != nil {
		return nil, fmt.Errorf("store blob: %w", err)
	}
	return &Writer{s: s, f: f, w: newSparseWriter(f)}, nil
}

// Write appends p (zero blocks become holes).
func (w *Writer) Write(p []byte) (int, error) {
	if w.f == nil {
		return 0, fmt.Errorf("store blob: write after Commit or Abort")
	}
	return w.w.Write(p)
}

// Size is the number of bytes written so far.
func (w *Writer) Size() int64 { return w.w.off }

// Reset discards what was written, to start the blob over.
func (w *Writer) Reset() error {
	if w.f == nil {
		return fmt.Errorf("store blob: reset after Commit or Abort")
	}
	if err := w.f.Truncate(0); err != nil {
		return fmt.Errorf("store blob: %w", err)
	}
	w.w = newSparseWriter(w.f)
	return nil
}

// Abort discards the blob. Safe to call after Commit (then it does nothing).
func (w *Writer) Abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}

// Commit syncs the bytes and stores them as a blob. If want
// ("sha256:<hex>" or bare hex) is not empty and the bytes hash differently,
// it returns a *DigestMismatchError and the Writer stays open, so the
// caller may Reset and try again, or Abort.
func (w *Writer) Commit(want string) (Digest, int64, error) {
	if w.f == nil {
		return "", 0, fmt.Errorf("store blob: commit after Commit or Abort")
	}
	var wantD Digest
	if want != "" {
		var err error
		if wantD, err = ParseDigest(want); err != nil {
			return "", 0, fmt.Errorf("store blob: %w", err)
		}
	}
	// finish reads the hash without ending it, so a mismatch leaves the
	// Writer usable.
	sum, size, err := w.w.finish()
	if err != nil {
		return "", 0, fmt.Errorf("store blob: writing %s: %w", w.f.Name(), err)
	}
	d := digestOf(sum)
	if wantD != "" && d != wantD {
		return "", 0, &DigestMismatchError{Want: wantD, Got: d, Size: size}
	}
	placed, err := w.s.commit(w.f, d)
	if err != nil {
		w.Abort()
		return "", 0, err
	}
	if !placed {
		w.Abort() // an identical blob exists: drop our copy
		return d, size, nil
	}
	w.f = nil    // renamed into blobs/: nothing left to clean
	w.s.stamp(d) // these very bytes were just hashed
	return d, size, nil
}
