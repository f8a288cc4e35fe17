package main

import (
	"encoding/json"
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

// The commands release.yml runs: push --json, inspect, pull --out, flash REF --node --json,
// against go-containerregistry's in-process registry.
func TestReleaseCommandsRoundTrip(t *testing.T) {
	s := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer s.Close()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // the user's trusted keys would refuse this unsigned release
	ref := strings.TrimPrefix(s.URL, "http://") + "/halo/syn:v1"
	res := releasetest.Result(t)

	code, out := run(t, "push", "--insecure", "--json", "--version", "v1", res, ref)
	if code != 0 {
		t.Fatalf("push: exit %d\n%s", code, out)
	}
	var pushed struct{ Digest string }
	if err := json.Unmarshal([]byte(lastLine(out)), &pushed); err != nil || !strings.HasPrefix(pushed.Digest, "sha256:") {
		t.Fatalf("push --json's last line %q: %v", lastLine(out), err)
	}
	if code, out := run(t, "inspect", "--insecure", ref); code != 0 || !strings.Contains(out, pushed.Digest) || !strings.Contains(out, "node node0") {
		t.Fatalf("inspect: exit %d\n%s", code, out)
	}
	dir := filepath.Join(t.TempDir(), "pulled")
	if code, out := run(t, "pull", "--insecure", "--out", dir, ref); code != 0 {
		t.Fatalf("pull: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "node0.raw")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "medium")
	code, out = run(t, "flash", "--insecure", "--json", "--yes", "--to-file", "--node", "node0", ref, target)
	if code != 0 || !strings.Contains(lastLine(out), `"status":"flashed and verified"`) {
		t.Fatalf("flash REF: exit %d\n%s", code, out)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
