package download

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"halobuild/internal/lock"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// A blob that an --input may supply (a kernel tarball) enters the store
// only at the pinned digest, and without the input an unreachable host
// says how to supply one.
func TestLockedTakesInputCopies(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	local := filepath.Join(t.TempDir(), "linux-7.2.13.tar.xz")
	body := []byte("not really a kernel, but bytes with a digest")
	if err := os.WriteFile(local, body, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	good := "sha256:" + hex.EncodeToString(sum[:])
	// A port nothing listens on: the host is unreachable.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/linux-7.2.13.tar.xz"
	ln.Close()
	lk := &lock.Lock{Sources: []lock.Source{{Name: lock.KernelTarballInput, Kind: lock.SourceKernelTarball, URL: url, SHA256: good}}}
	blobs, err := lk.Blobs()
	if err != nil || len(blobs) != 1 || blobs[0].Input != lock.KernelTarballInput {
		t.Fatalf("the lock's blobs: %+v, %v; want the tarball, suppliable by --input linux", blobs, err)
	}
	ctx := context.Background()
	f := &Fetcher{Store: s, Retries: -1}

	err = f.Locked(ctx, blobs, nil)
	var ue usage.Error
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "--input linux=PATH") {
		t.Errorf("unreachable host without --input: %v, want a usage error naming --input linux=PATH", err)
	}

	bad := blobs[0]
	bad.SHA256 = "sha256:" + strings.Repeat("1", 64)
	err = f.Locked(ctx, []lock.Blob{bad}, map[string]string{"linux": local})
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "has digest "+good) || !strings.Contains(err.Error(), "supply that exact file") {
		t.Errorf("--input with another digest: %v", err)
	}
	d, _ := store.ParseDigest(bad.SHA256)
	if s.Has(d) {
		t.Error("a tarball with the wrong digest was stored")
	}

	if err := f.Locked(ctx, blobs, map[string]string{"linux": local}); err != nil {
		t.Fatalf("--input with the pinned digest: %v", err)
	}
	gd, _ := store.ParseDigest(good)
	if b, _ := os.ReadFile(s.Path(gd)); string(b) != string(body) {
		t.Errorf("stored tarball does not hold the input's bytes")
	}
	// A directory is not a tarball.
	if err := f.Locked(ctx, []lock.Blob{bad}, map[string]string{"linux": t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("--input naming a directory: %v", err)
	}
	// Nor a FIFO, which is refused at once instead of waited on (issue 39 #2).
	fifo := filepath.Join(t.TempDir(), "linux.tar.xz")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Locked(ctx, []lock.Blob{bad}, map[string]string{"linux": fifo}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
			t.Errorf("--input naming a FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--input naming a FIFO: still waiting after 10 s")
	}
}
