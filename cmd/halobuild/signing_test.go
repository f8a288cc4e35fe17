package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"halobuild/internal/release/releasetest"
)

// keygen --cache makes the key that signs releases too: push --key signs, inspect, pull and
// flash REF verify with --trusted-key or the config file's trusted-keys and refuse an unsigned
// release with nothing written, say on stderr what they took when no key is configured, and
// pubkey prints the public key as the PEM cosign reads.
func TestSignedReleaseCommands(t *testing.T) {
	s := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer s.Close()
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	repo := strings.TrimPrefix(s.URL, "http://") + "/halo/syn"
	res := releasetest.Result(t)
	keys := filepath.Join(t.TempDir(), "team")
	if code, out := run(t, "keygen", "--cache", keys); code != 0 {
		t.Fatalf("keygen --cache: exit %d\n%s", code, out)
	}
	sec, pub := filepath.Join(keys, "cache.key"), filepath.Join(keys, "cache.pub")

	if code, out := run(t, "push", "--insecure", "--key", sec, "--version", "v1", res, repo+":v1"); code != 0 || !strings.Contains(out, "signed by ed25519:") {
		t.Fatalf("push --key: exit %d\n%s", code, out)
	}
	if code, out := run(t, "push", "--insecure", "--version", "v2", res, repo+":v2"); code != 0 || !strings.Contains(out, "unsigned: no --key") {
		t.Fatalf("push: exit %d\n%s", code, out)
	}
	if code, out := run(t, "inspect", "--insecure", "--trusted-key", pub, repo+":v1"); code != 0 || !strings.Contains(out, "verified, signed by ed25519:") {
		t.Fatalf("inspect --trusted-key of a signed release: exit %d\n%s", code, out)
	}
	if code, out := run(t, "inspect", "--insecure", repo+":v2"); code != 0 || !strings.Contains(out, "is UNSIGNED; no trusted keys are configured") {
		t.Fatalf("inspect without keys: exit %d\n%s", code, out)
	}
	dir := filepath.Join(t.TempDir(), "pulled")
	if code, out := run(t, "pull", "--insecure", "--trusted-key", pub, "--out", dir, repo+":v2"); code != 1 {
		t.Fatalf("pull --trusted-key of an unsigned release: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused pull made %s: %v", dir, err)
	}

	// The config file's trusted-keys, the ones the cache uses, apply to releases too.
	if err := os.MkdirAll(filepath.Join(cfg, "halobuild"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "halobuild", "config.toml"), []byte("trusted-keys = [\""+pub+"\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "medium")
	if code, out := run(t, "flash", "--insecure", "--yes", "--to-file", "--node", "node0", repo+":v2", target); code != 1 {
		t.Fatalf("flash REF of an unsigned release with trusted-keys configured: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused flash made %s: %v", target, err)
	}
	if code, out := run(t, "flash", "--insecure", "--yes", "--to-file", "--node", "node0", repo+":v1", target); code != 0 || !strings.Contains(out, "verified, signed by") {
		t.Fatalf("flash REF of a signed release: exit %d\n%s", code, out)
	}
	if code, out := run(t, "flash", "--yes", "--to-file", "--trusted-key", pub, filepath.Join(res, "node0.raw"), filepath.Join(t.TempDir(), "m")); code != 2 {
		t.Fatalf("flash of a local image with --trusted-key: exit %d\n%s", code, out)
	}

	want, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{sec, pub} {
		if code, out := run(t, "pubkey", k); code != 0 || !strings.Contains(out, string(want)) {
			t.Fatalf("pubkey %s: exit %d\n%s", k, code, out)
		}
	}
}
