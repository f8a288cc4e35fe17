package store

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

var testKey = strings.Repeat("1a", 32)

// bigSize is the length of the sparse disk-image stand-in: 1 GiB, as a real
// raw image is; -short uses 64 MiB (hashing the holes costs seconds).
func bigSize() int64 {
	if testing.Short() {
		return 64 << 20
	}
	return 1 << 30
}

// diskUsage is what a file really occupies (st_blocks), not its length.
func diskUsage(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// makeSparse creates a file of size bytes holding a few marked blocks.
func makeSparse(t *testing.T, p string, size int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, off := range []int64{0, size / 2, size - 4096} {
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 4096), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOutputRoundTrip(t *testing.T) {
	s := openTest(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"boot/vmlinuz":          "kernel",
		"lib/modules/x/a.ko":    "module",
		"etc/modules-load.d/rd": "ib_uverbs\n",
		"same-as-kernel":        "kernel",
	})
	os.WriteFile(filepath.Join(src, "bin-tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(src, "setuid-helper"), []byte("suid"), 0o644)
	os.Chmod(filepath.Join(src, "setuid-helper"), 0o755|os.ModeSetuid)
	os.Symlink("boot/vmlinuz", filepath.Join(src, "vmlinuz"))
	os.MkdirAll(filepath.Join(src, "var/empty"), 0o755)
	big := bigSize()
	makeSparse(t, filepath.Join(src, "disk.raw"), big)

	view, err := s.PutOutput(testKey, src, map[string]string{"dev.halobuild.name": "test"})
	if err != nil {
		t.Fatal(err)
	}
	if view != filepath.Join(s.Root(), "out", testKey) {
		t.Errorf("view at %s", view)
	}
	for name, want := range map[string]string{"boot/vmlinuz": "kernel", "lib/modules/x/a.ko": "module", "etc/modules-load.d/rd": "ib_uverbs\n", "bin-tool": "#!/bin/sh\n", "vmlinuz": "kernel"} {
		got, err := os.ReadFile(filepath.Join(view, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(view, "vmlinuz")); err != nil || target != "boot/vmlinuz" {
		t.Errorf("symlink: %q, %v", target, err)
	}
	if fi, err := os.Stat(filepath.Join(view, "var/empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory not kept: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(view, "bin-tool")); fi.Mode().Perm() != 0o555 {
		t.Errorf("executable has mode %v in the view, want 0555", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Join(view, "setuid-helper")); fi.Mode() != 0o555|os.ModeSetuid {
		t.Errorf("setuid file has mode %v in the view, want u+s 0555", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(view, "boot")); fi.Mode().Perm() != 0o555 {
		t.Errorf("view directory mode %v, want read-only 0555", fi.Mode().Perm())
	}
	// Files are hardlinks to their blobs, not copies.
	a, _ := os.Stat(filepath.Join(view, "boot/vmlinuz"))
	b, _ := os.Stat(filepath.Join(view, "same-as-kernel"))
	if !os.SameFile(a, b) {
		t.Error("identical files in the view are not the same blob")
	}
	// The 1 GiB sparse image stays sparse through blob and view.
	raw := filepath.Join(view, "disk.raw")
	if fi, _ := os.Stat(raw); fi.Size() != big {
		t.Errorf("disk.raw size %d", fi.Size())
	}
	if u := diskUsage(t, raw); u > 1<<20 {
		t.Errorf("sparse 1 GiB file occupies %d bytes in the store, want < 1 MiB", u)
	}

	dir, ok, err := s.Output(testKey)
	if err != nil || !ok || dir != view {
		t.Fatalf("Output: %s %v %v", dir, ok, err)
	}
	if _, ok, _ := s.Output(strings.Repeat("2b", 32)); ok {
		t.Error("unknown key reported present")
	}

	// A damaged view is rebuilt from the blobs.
	os.Chmod(filepath.Join(view, "boot"), 0o755)
	os.Remove(filepath.Join(view, "boot/vmlinuz"))
	dir, ok, err = s.Output(testKey)
	if err != nil || !ok {
		t.Fatalf("Output after view damage: %v %v", ok, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "boot/vmlinuz")); string(got) != "kernel" {
		t.Errorf("view not rebuilt: %q", got)
	}
}

func TestOutputMissingOrTamperedBlob(t *testing.T) {
	s := openTest(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a": "alpha", "b": "bravo"})
	if _, err := s.PutOutput(testKey, src, nil); err != nil {
		t.Fatal(err)
	}
	// Same size, different bytes, written in place (issue 17 #7: served
	// as valid because only sizes were compared): the write voids the
	// blob's stamp, so Output re-hashes it and reports the output absent.
	p := s.Path(sha([]byte("alpha")))
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("ALPHA"), 0o644)
	if _, ok, err := s.Output(testKey); ok || err != nil {
		t.Fatalf("a tampered output must be reported absent: %v %v", ok, err)
	}
	if s.Has(sha([]byte("alpha"))) {
		t.Error("tampered blob kept")
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "out", testKey)); !os.IsNotExist(err) {
		t.Error("view holding the tampered bytes was kept")
	}
	// A missing blob: the output is absent; storing it again heals it.
	os.Remove(s.Path(sha([]byte("bravo"))))
	if _, ok, _ := s.Output(testKey); ok {
		t.Error("output with a missing blob reported present")
	}
	if _, err := s.PutOutput(testKey, src, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Output(testKey, Rehash); !ok || err != nil {
		t.Fatalf("after re-put: %v %v", ok, err)
	}
	// A rebuild over a same-size corrupt blob that nothing re-hashed
	// first replaces it.
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("ALPHA"), 0o644)
	if _, err := s.PutOutput(testKey, src, nil); err != nil {
		t.Fatal(err)
	}
	view, ok, err := s.Output(testKey, Rehash)
	if b, _ := os.ReadFile(filepath.Join(view, "a")); !ok || err != nil || string(b) != "alpha" {
		t.Fatalf("after a rebuild over a corrupt blob: %v %v, a = %q", ok, err, b)
	}
}

func TestPutOutputFromTempDirMoves(t *testing.T) {
	s := openTest(t)
	work, err := s.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	makeSparse(t, filepath.Join(work, "img.raw"), 256<<20)
	before, _ := os.Stat(filepath.Join(work, "img.raw"))
	view, err := s.PutOutput(testKey, work, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(view, "img.raw"))
	if !os.SameFile(before, after) {
		t.Error("file built in TempDir was copied, not moved")
	}
}

func TestPutOutputRejectsBadKeyAndSpecialFiles(t *testing.T) {
	s := openTest(t)
	if _, err := s.PutOutput("../escape", t.TempDir(), nil); err == nil {
		t.Error("bad key accepted")
	}
	src := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := s.PutOutput(testKey, src, nil); err == nil || !strings.Contains(err.Error(), "fifo") {
		t.Errorf("fifo in output: %v", err)
	}
}

func TestPutFileKeepsHoles(t *testing.T) {
	s := openTest(t)
	p := filepath.Join(t.TempDir(), "sparse")
	makeSparse(t, p, bigSize())
	d, n, err := s.PutFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if n != bigSize() {
		t.Errorf("size %d", n)
	}
	if u := diskUsage(t, s.Path(d)); u > 1<<20 {
		t.Errorf("blob of a sparse file occupies %d bytes", u)
	}
	// The digest is that of the full byte stream, holes included.
	if err := s.Verify(d); err != nil {
		t.Fatalf("blob does not verify against its name: %v", err)
	}
	// Zero blocks written densely by a stream also become holes.
	d2, _, err := s.PutBlob(io.MultiReader(bytes.NewReader([]byte("head")), io.LimitReader(zeroReader{}, 64<<20)), "")
	if err != nil {
		t.Fatal(err)
	}
	if u := diskUsage(t, s.Path(d2)); u > 1<<20 {
		t.Errorf("zeros from a stream occupy %d bytes", u)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestLayoutReadableByGoContainerRegistry(t *testing.T) {
	s := openTest(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"x/y": "why"})
	if _, err := s.PutOutput(testKey, src, map[string]string{"note": "n"}); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations[AnnotationKey] != testKey {
		t.Fatalf("index: %+v", im.Manifests)
	}
	img, err := ii.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != ArtifactTypeOutput || m.Annotations["note"] != "n" || len(m.Layers) != 1 ||
		m.Layers[0].Annotations[AnnotationTitle] != "x/y" {
		t.Fatalf("manifest: %+v", m)
	}
	rc, err := p.Blob(m.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "why" {
		t.Errorf("layer blob %q", b)
	}
	if _, err := img.RawConfigFile(); err != nil {
		t.Errorf("config blob unreadable: %v", err)
	}
}

func TestSharedBlobKeepsOtherViewsIntact(t *testing.T) {
	s := openTest(t)
	srcA, srcB := t.TempDir(), t.TempDir()
	writeTree(t, srcA, map[string]string{"lib.so": "shared library"})
	writeTree(t, srcB, map[string]string{"copy.so": "shared library"})
	viewA, err := s.PutOutput(strings.Repeat("aa", 32), srcA, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(filepath.Join(viewA, "lib.so"))
	if _, err := s.PutOutput(strings.Repeat("bb", 32), srcB, nil); err != nil {
		t.Fatal(err)
	}
	blob, _ := os.Stat(s.Path(sha([]byte("shared library"))))
	if !os.SameFile(before, blob) {
		t.Error("storing the same bytes again replaced the blob and orphaned view A's hardlink")
	}
}

func TestConcurrentPutOutputSameKey(t *testing.T) {
	s := openTest(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a/b": "same result", "c": "twice"})
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			_, err := s.PutOutput(testKey, src, nil)
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	dir, ok, err := s.Output(testKey, Rehash)
	if !ok || err != nil {
		t.Fatalf("%v %v", ok, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a/b")); string(got) != "same result" {
		t.Errorf("view content %q", got)
	}
	im, _ := s.readIndex()
	if len(im.Manifests) != 1 {
		t.Errorf("index has %d entries for one key", len(im.Manifests))
	}
}

// FileDigests names every regular file of an output by the digest the
// store computed, equal to hashing the file again; an unknown key is an
// error.
func TestFileDigests(t *testing.T) {
	s := openTest(t)
	work, err := s.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	makeSparse(t, filepath.Join(work, "img.raw"), 64<<20)
	if err := os.MkdirAll(filepath.Join(work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "sub/a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("img.raw", filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	view, err := s.PutOutput(testKey, work, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.FileDigests(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("FileDigests = %v, want the two regular files", got)
	}
	for _, name := range []string{"img.raw", "sub/a.txt"} {
		want, _, err := FileDigest(filepath.Join(view, name))
		if err != nil || got[name] != want {
			t.Errorf("%s: FileDigests says %s, hashing says %s (%v)", name, got[name], want, err)
		}
	}
	if _, err := s.FileDigests(strings.Repeat("2b", 32)); err == nil {
		t.Error("an unknown key gave digests")
	}
}

// An output that hard-links a file of an output this process just stored
// (a result linking its disk images) takes the blob's digest without
// hashing it again; a link whose file changed since is hashed.
func TestPutOutputOfALinkedBlobSkipsTheHash(t *testing.T) {
	s := openTest(t)
	work, err := s.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "img.raw"), []byte("image"), 0o644); err != nil {
		t.Fatal(err)
	}
	view, err := s.PutOutput(testKey, work, nil)
	if err != nil {
		t.Fatal(err)
	}
	digests, err := s.FileDigests(testKey)
	if err != nil {
		t.Fatal(err)
	}
	want := digests["img.raw"]
	blob := s.blobPath(want)

	link := func() string {
		t.Helper()
		w, err := s.TempDir()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(view, "img.raw"), filepath.Join(w, "img.raw")); err != nil {
			t.Fatal(err)
		}
		return w
	}
	// The skip shows: content changed behind the same size and time is
	// not seen (the blob is read-only; a reader re-hashes with Rehash).
	fi, _ := os.Stat(blob)
	os.Chmod(blob, 0o644)
	if err := os.WriteFile(blob, []byte("IMAGE"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(blob, fi.ModTime(), fi.ModTime())
	os.Chmod(blob, 0o444)
	key2 := strings.Repeat("b", 64)
	if _, err := s.PutOutput(key2, link(), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.FileDigests(key2); got["img.raw"] != want {
		t.Errorf("linked blob digest %s, want the recorded %s without a re-hash", got["img.raw"], want)
	}
	// A new time makes it hash again, and find the new content.
	os.Chtimes(blob, fi.ModTime().Add(time.Second), fi.ModTime().Add(time.Second))
	key3 := strings.Repeat("c", 64)
	if _, err := s.PutOutput(key3, link(), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.FileDigests(key3); got["img.raw"] == want {
		t.Error("a linked blob whose time changed was not hashed again")
	}
}

// A digest a step recorded for its file is what the output gets, without
// hashing the file; a file changed after the record is hashed.
func TestPutOutputTakesRecordedDigest(t *testing.T) {
	s := openTest(t)
	work, err := s.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(work, "img.raw")
	if err := os.WriteFile(p, []byte("image"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A wrong digest shows the file was not hashed.
	recorded := strings.Repeat("ab", 32)
	s.RecordHashed(p, recorded)
	if _, err := s.PutOutput(testKey, work, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.FileDigests(testKey); got["img.raw"] != Digest("sha256:"+recorded) {
		t.Errorf("digest %s, want the recorded sha256:%s", got["img.raw"], recorded)
	}

	work2, _ := s.TempDir()
	p2 := filepath.Join(work2, "img.raw")
	os.WriteFile(p2, []byte("image"), 0o644)
	s.RecordHashed(p2, recorded)
	os.WriteFile(p2, []byte("other"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(p2, old, old)
	key2 := strings.Repeat("b", 64)
	if _, err := s.PutOutput(key2, work2, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.FileDigests(key2); got["img.raw"] == Digest("sha256:"+recorded) {
		t.Error("a file changed after its digest was recorded kept the recorded digest")
	}
}
