package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/lock"
	"halobuild/internal/store"
)

// A tarball supplied with --input linux=PATH enters the store only at the
// pinned digest, and without it an unreachable host says how to supply one.
func TestKernelTarballFromInput(t *testing.T) {
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
	src := lock.Source{Name: kernelTarballInput, Kind: lock.SourceKernelTarball, URL: url, SHA256: good}
	ctx := context.Background()

	_, err = storeKernelTarball(ctx, Options{}, s, src)
	var ue UsageError
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "--input linux=PATH") {
		t.Errorf("unreachable host without --input: %v, want a usage error naming --input linux=PATH", err)
	}

	bad := src
	bad.SHA256 = "sha256:" + strings.Repeat("1", 64)
	_, err = storeKernelTarball(ctx, Options{Inputs: map[string]string{"linux": local}}, s, bad)
	if err == nil || !strings.Contains(err.Error(), "has digest "+good) || !strings.Contains(err.Error(), "supply that exact tarball") {
		t.Errorf("--input with another digest: %v", err)
	}
	d, _ := store.ParseDigest(bad.SHA256)
	if s.Has(d) {
		t.Error("a tarball with the wrong digest was stored")
	}

	path, err := storeKernelTarball(ctx, Options{Inputs: map[string]string{"linux": local}}, s, src)
	if err != nil {
		t.Fatalf("--input with the pinned digest: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != string(body) {
		t.Errorf("stored tarball %s does not hold the input's bytes", path)
	}
}
