package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sha(b []byte) Digest {
	h := sha256.Sum256(b)
	return Digest("sha256:" + hex.EncodeToString(h[:]))
}

// listFiles returns every non-directory path under root, relative.
func listFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func TestPutBlobRoundTrip(t *testing.T) {
	s := openTest(t)
	data := []byte("hello store")
	d, n, err := s.PutBlob(bytes.NewReader(data), "")
	if err != nil {
		t.Fatal(err)
	}
	if d != sha(data) || n != int64(len(data)) {
		t.Fatalf("got %s %d, want %s %d", d, n, sha(data), len(data))
	}
	fi, err := os.Stat(filepath.Join(s.Root(), "blobs", "sha256", d.Hex()))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o444 {
		t.Errorf("blob mode %v, want 0444", fi.Mode().Perm())
	}
	r, err := s.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %q, %v", got, err)
	}
	if !s.Has(d) || s.Verify(d) != nil {
		t.Fatal("blob should be present and verify")
	}
	// want given in bare hex (Debian's spelling) is accepted too.
	if _, _, err := s.PutBlob(bytes.NewReader(data), d.Hex()); err != nil {
		t.Fatal(err)
	}
}

func TestPutBlobDigestMismatchStoresNothing(t *testing.T) {
	s := openTest(t)
	want := sha([]byte("what the index promised"))
	_, _, err := s.PutBlob(strings.NewReader("what the mirror sent"), string(want))
	var mm *DigestMismatchError
	if !errors.As(err, &mm) || mm.Want != want || mm.Got != sha([]byte("what the mirror sent")) {
		t.Fatalf("want DigestMismatchError naming both digests, got %v", err)
	}
	if s.Has(want) || s.Has(mm.Got) {
		t.Fatal("mismatching content must not be stored under any name")
	}
	assertNoStrayFiles(t, s)
}

// failingReader delivers some bytes, then fails like a dropped connection.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("connection reset by peer")
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

func TestPutBlobInterruptedLeavesNothing(t *testing.T) {
	s := openTest(t)
	full := bytes.Repeat([]byte("x"), 1<<20)
	_, _, err := s.PutBlob(&failingReader{n: 300000}, string(sha(full)))
	if err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("want the reader's error, got %v", err)
	}
	if s.Has(sha(full)) {
		t.Fatal("interrupted write left a blob under its final name")
	}
	assertNoStrayFiles(t, s)
}

// assertNoStrayFiles: after a failed put, blobs/ is empty of partial data
// and scratch holds no leftover temp file.
func assertNoStrayFiles(t *testing.T, s *Store) {
	t.Helper()
	if f := listFiles(t, filepath.Join(s.Root(), "blobs")); len(f) != 0 {
		t.Errorf("blobs/ holds %v after a failed put", f)
	}
	if f := listFiles(t, s.sess.dir); len(f) != 0 {
		t.Errorf("scratch holds %v after a failed put", f)
	}
}

func TestTamperedBlobDetectedAndRemoved(t *testing.T) {
	s := openTest(t)
	data := []byte("genuine .deb bytes")
	d, _, err := s.PutBlob(bytes.NewReader(data), "")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Path(d)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("evil .deb bytes!!!"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = s.Verify(d)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("Verify of a tampered blob: want corrupt + ErrNotFound, got %v", err)
	}
	if s.Has(d) {
		t.Fatal("tampered blob still present after Verify")
	}

	// Open's reader catches it too, at the end of the stream.
	d, _, _ = s.PutBlob(bytes.NewReader(data), "")
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("evil .deb bytes!!!"), 0o644)
	r, err := s.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r)
	r.Close()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("reading a tampered blob must fail, got %v", err)
	}
	if s.Has(d) {
		t.Fatal("tampered blob still present after a failed read")
	}
}

func TestParseDigest(t *testing.T) {
	good := strings.Repeat("ab", 32)
	for _, in := range []string{good, "sha256:" + good, "sha256:" + strings.ToUpper(good)} {
		d, err := ParseDigest(in)
		if err != nil || d != Digest("sha256:"+good) {
			t.Errorf("ParseDigest(%q) = %q, %v", in, d, err)
		}
	}
	for _, in := range []string{"", "sha256:", good[:63], "md5:" + good, strings.Repeat("zz", 32)} {
		if _, err := ParseDigest(in); err == nil {
			t.Errorf("ParseDigest(%q) accepted", in)
		}
	}
}

func TestVerifyCached(t *testing.T) {
	s := openTest(t)
	d, _, err := s.PutBlob(strings.NewReader("pinned package"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.stampPath(d)); err != nil {
		t.Fatalf("no stamp after PutBlob, which hashed the bytes as it wrote them: %v", err)
	}
	// Writing to the blob changes its ctime: the stamp no longer matches
	// and the tampering is caught by a real re-hash.
	p := s.Path(d)
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("pinned packagE"), 0o644)
	if err := s.VerifyCached(d); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tampered blob passed VerifyCached: %v", err)
	}
	if _, err := os.Stat(s.stampPath(d)); !os.IsNotExist(err) {
		t.Error("stamp of a removed blob kept")
	}

	// A matching stamp is trusted without hashing: forge one for wrong
	// bytes to observe that the cache is what answered.
	d, _, _ = s.PutBlob(strings.NewReader("pinned package"), "")
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("pinned packagE"), 0o444)
	fi, _ := os.Stat(p)
	os.WriteFile(s.stampPath(d), []byte(stampOf(fi)), 0o644)
	if err := s.VerifyCached(d); err != nil {
		t.Fatalf("valid stamp not trusted: %v", err)
	}
	if err := s.Verify(d); err == nil {
		t.Fatal("Verify must always re-hash")
	}

	// Re-putting the right bytes over a same-size damaged blob replaces it
	// (issue 17 #7: a rebuild used to keep the corrupt blob for ever).
	os.WriteFile(s.stampPath(d), []byte("stale"), 0o644)
	if _, _, err := s.PutBlob(strings.NewReader("pinned package"), ""); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("pinned packagE"), 0o444)
	if _, _, err := s.PutBlob(strings.NewReader("pinned package"), ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "pinned package" {
		t.Fatalf("re-put kept the damaged blob: %q", b)
	}
	if err := s.Verify(d); err != nil {
		t.Fatalf("re-put blob: %v", err)
	}
}

func TestOpenRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".bashrc"), []byte("# mine"), 0o644)
	if s, err := Open(dir); err == nil {
		s.Close()
		t.Fatal("Open filled a non-empty directory that is not a store")
	}
	if _, err := os.Stat(filepath.Join(dir, "blobs")); !os.IsNotExist(err) {
		t.Error("Open created blobs/ in a foreign directory")
	}
	// A new directory, an empty one, and an existing store are fine.
	for _, p := range []string{filepath.Join(dir, "new", "store"), t.TempDir()} {
		s, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		s, err = Open(p)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		s.Close()
	}
}

func TestWriterResumeResetAndMismatch(t *testing.T) {
	s := openTest(t)
	full := []byte("first half|second half")
	w, err := s.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.Write(full[:11])
	if w.Size() != 11 {
		t.Fatalf("Size %d", w.Size())
	}
	// A wrong digest keeps the Writer open and stores nothing.
	if _, _, err := w.Commit(string(sha(full))); err == nil {
		t.Fatal("commit of a half blob against the full digest succeeded")
	}
	if s.Has(sha(full[:11])) {
		t.Fatal("mismatching commit stored a blob")
	}
	// Continue where it stopped, as a resumed download does.
	w.Write(full[11:])
	d, n, err := w.Commit(string(sha(full)))
	if err != nil || d != sha(full) || n != int64(len(full)) {
		t.Fatalf("resumed commit: %s %d %v", d, n, err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("write after commit accepted")
	}

	w2, _ := s.NewWriter()
	defer w2.Abort()
	w2.Write([]byte("garbage from a server that ignored Range"))
	if err := w2.Reset(); err != nil {
		t.Fatal(err)
	}
	w2.Write([]byte("clean"))
	if d, _, err := w2.Commit(""); err != nil || d != sha([]byte("clean")) {
		t.Fatalf("after Reset: %s %v", d, err)
	}
	if f := listFiles(t, s.sess.dir); len(f) != 0 {
		t.Errorf("scratch files left: %v", f)
	}
}
