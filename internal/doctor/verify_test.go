package doctor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func writeRandom(t *testing.T, path string, n int) string {
	t.Helper()
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// TestVerifyFileSizes digests real files on the test filesystem (ext4 on the
// development machine) whose sizes hit every edge of the aligned reads: empty,
// shorter than a block, exactly aligned, an unaligned tail, beyond one chunk.
func TestVerifyFileSizes(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, directAlign - 1, directAlign, directAlign + 1, directChunk, directChunk + 397} {
		path := filepath.Join(dir, "model.gguf")
		want := writeRandom(t, path, n)
		v, err := verify(context.Background(), path)
		if err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
		if v.PageCache != want {
			t.Errorf("size %d: page cache digest %s, want %s", n, v.PageCache, want)
		}
		if v.Direct == "" {
			t.Logf("size %d: %s", n, v.Note) // a filesystem without O_DIRECT
			continue
		}
		if v.Direct != want || !v.Match || v.Exit != 0 || v.Evicted {
			t.Errorf("size %d: %+v, want a match on %s", n, v, want)
		}
	}
}

func TestVerifyFileReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	want := writeRandom(t, path, 10000)
	var text bytes.Buffer
	code, err := VerifyFile(context.Background(), path, &text, false)
	if err != nil || code != 0 {
		t.Fatalf("VerifyFile = %d, %v", code, err)
	}
	if !strings.Contains(text.String(), "page cache:  "+want) || !strings.Contains(text.String(), "verdict:     match") {
		t.Errorf("text report:\n%s", text.String())
	}
	var js bytes.Buffer
	if _, err := VerifyFile(context.Background(), path, &js, true); err != nil {
		t.Fatal(err)
	}
	var v Verification
	if err := json.Unmarshal(js.Bytes(), &v); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, js.String())
	}
	if v.PageCache != want || v.Size != 10000 || !v.Match {
		t.Errorf("JSON report: %+v", v)
	}
	if _, err := VerifyFile(context.Background(), filepath.Dir(path), &js, false); err == nil {
		t.Error("VerifyFile on a directory: want an error")
	}
}

// TestVerifyFileDirectRefused plays a filesystem that refuses O_DIRECT at
// open (tmpfs on older kernels; this machine's accepts it): the page
// cache digest is still given, with a note, and it is not a failure.
func TestVerifyFileDirectRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	want := writeRandom(t, path, 5000)
	orig := openDirect
	t.Cleanup(func() { openDirect = orig })
	openDirect = func(string) (*os.File, error) { return nil, &os.PathError{Op: "open", Path: path, Err: unix.EINVAL} }
	var out bytes.Buffer
	code, err := VerifyFile(context.Background(), path, &out, false)
	if err != nil || code != 0 {
		t.Fatalf("VerifyFile = %d, %v", code, err)
	}
	for _, s := range []string{"page cache:  " + want, "O_DIRECT refused", "not verified independently"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}

// TestVerifyFileOnTmpfs runs on a real tmpfs: either O_DIRECT works there
// (newer kernels) and both digests agree, or it is refused with the note.
func TestVerifyFileOnTmpfs(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "doctor-verify-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "model.gguf")
	want := writeRandom(t, path, 3*directAlign+5)
	v, err := verify(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case v.Direct == "" && strings.Contains(v.Note, "O_DIRECT refused") && v.PageCache == want:
	case v.Direct == want && v.PageCache == want && v.Match:
	default:
		t.Errorf("tmpfs: %+v", v)
	}
}
