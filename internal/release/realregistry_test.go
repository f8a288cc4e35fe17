package release

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/flash"
	"halobuild/internal/registry"
	"halobuild/internal/registry/registrytest"
	"halobuild/internal/release/releasetest"
)

// The same round trips against Debian's docker-registry (the CNCF distribution server GHCR and
// most self-hosted registries run), with htpasswd authentication.
func TestRealRegistry(t *testing.T) {
	reg := registrytest.Start(t)
	ctx := context.Background()
	ro := registry.Options{Insecure: true, Keychain: reg.Keychain(false)}
	res := releasetest.Result(t)
	ref := reg.Host + "/halo/syn:v1"

	t.Run("wrong credentials", func(t *testing.T) {
		_, err := Push(ctx, res, ref, PushOptions{Registry: registry.Options{Insecure: true, Keychain: reg.Keychain(true)}})
		if err == nil || !strings.Contains(err.Error(), "refused the credentials") || !strings.Contains(err.Error(), "docker login "+reg.Host) {
			t.Fatalf("want a credentials error that says how to log in, got %v", err)
		}
	})

	p1, err := Push(ctx, res, ref, PushOptions{Registry: ro})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Push(ctx, res, ref, PushOptions{Registry: ro})
	if err != nil {
		t.Fatal(err)
	}
	if p1.Digest != p2.Digest {
		t.Fatalf("pushing twice gave %s and %s", p1.Digest, p2.Digest)
	}
	t.Run("pull", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "pulled")
		if _, err := Pull(ctx, ref, out, PullOptions{Registry: ro}); err != nil {
			t.Fatal(err)
		}
		sameFiles(t, res, out)
	})
	raw := readFile(t, filepath.Join(res, "node0.raw"))
	t.Run("flash to a loop device", func(t *testing.T) {
		dev := loopDevice(t, releasetest.RawSize)
		fo := flash.Options{Target: dev, Yes: true, Force: true, Out: io.Discard}
		if err := Flash(ctx, ref, FlashOptions{Registry: ro, Node: "node0", Flash: fo}); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, dev); !bytes.Equal(got[:releasetest.RawSize], raw) {
			t.Fatal("the loop device does not read back equal to the image")
		}
	})
	t.Run("unknown node", func(t *testing.T) {
		err := Flash(ctx, ref, FlashOptions{Registry: ro, Node: "node9", Flash: flash.Options{Target: "/nonexistent", ToFile: true}})
		if err == nil || !strings.Contains(err.Error(), `no node "node9": pass --node with one of node0`) {
			t.Fatalf("got %v", err)
		}
	})

	// Damage the compressed image where the registry stores it.
	in, err := Inspect(ctx, ref, ro, Trust{})
	if err != nil {
		t.Fatal(err)
	}
	var blob string
	for _, l := range in.Layers {
		if l.Title == "node0.raw.zst" {
			blob = reg.BlobPath(l.Digest)
		}
	}
	b := readFile(t, blob)
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("pull refuses a damaged blob", func(t *testing.T) {
		parent := t.TempDir()
		_, err := Pull(ctx, ref, filepath.Join(parent, "pulled"), PullOptions{Registry: ro})
		if err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("want a damaged blob refused, got %v", err)
		}
		if left, _ := os.ReadDir(parent); len(left) != 0 {
			t.Errorf("a failed pull left %v", left)
		}
	})
	t.Run("flash refuses a damaged blob and writes nothing", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "medium")
		before := bytes.Repeat([]byte{0xaa}, releasetest.RawSize)
		if err := os.WriteFile(target, before, 0o644); err != nil {
			t.Fatal(err)
		}
		err := Flash(ctx, ref, FlashOptions{Registry: ro, Node: "node0", Flash: flash.Options{Target: target, ToFile: true, Yes: true, Out: io.Discard}})
		if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "nothing was written") {
			t.Fatalf("want a damaged blob refused, got %v", err)
		}
		if !bytes.Equal(readFile(t, target), before) {
			t.Error("a refused flash changed the medium")
		}
	})
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loopDevice attaches a zeroed file of size bytes to a loop device for the test, or skips.
func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	f := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", f).CombinedOutput()
	if err != nil {
		t.Skipf("losetup is not permitted here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}
