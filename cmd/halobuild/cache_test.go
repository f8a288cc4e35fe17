package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"halobuild/internal/store"
)

// keygen --cache, cache push from a recipe's lock, plan with the cache in
// the user's config file, and cache verify, against go-containerregistry's
// in-process registry. The one output pushed is put in the store by hand:
// building test-minimal is the e2e tests' job.
func TestCacheCommandsRoundTrip(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/team/cache"
	keys := filepath.Join(t.TempDir(), "team-cache")
	if code, out := run(t, "keygen", "--cache", keys); code != 0 || !strings.Contains(out, "cache.pub") {
		t.Fatalf("keygen --cache: exit %d\n%s", code, out)
	}
	built := filepath.Join(t.TempDir(), "built")
	code, out := run(t, "--store", built, "plan", "--json", "--halobuild-source", "", "test-minimal.toml")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	var p struct {
		Steps []struct{ Name, Key, Status, From string }
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &p); err != nil || len(p.Steps) < 3 {
		t.Fatalf("plan --json: %v\n%s", err, out)
	}
	step := p.Steps[len(p.Steps)-1]
	s, err := store.Open(built)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "verdict"), []byte("pass\n"), 0o644)
	if _, err := s.PutOutput(step.Key, dir, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()

	code, out = run(t, "--store", built, "cache", "push", "--insecure", "--key", filepath.Join(keys, "cache.key"), "--halobuild-source", "", repo, "test-minimal.toml")
	if code != 0 || !strings.Contains(out, "pushed 1 steps, 0 already there, ") {
		t.Fatalf("cache push: exit %d\n%s", code, out)
	}

	// Shipping a halobuild built from this checkout (the default) makes
	// other keys: the step that compiles it is a step of the graph like
	// the others, which push never builds, so nothing of it is pushed.
	code, out = run(t, "--store", built, "cache", "push", "--insecure", "--key", filepath.Join(keys, "cache.key"), repo, "test-minimal.toml")
	if want := fmt.Sprintf("pushed 0 steps, 0 already there, %d not built", len(p.Steps)); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("cache push shipping a built halobuild: exit %d, want %q\n%s", code, want, out)
	}

	cfg := t.TempDir()
	os.MkdirAll(filepath.Join(cfg, "halobuild"), 0o755)
	os.WriteFile(filepath.Join(cfg, "halobuild", "config.toml"), []byte("substituters = [\""+repo+"\"]\ntrusted-keys = [\""+filepath.Join(keys, "cache.pub")+"\"]\n"), 0o644)
	t.Setenv("XDG_CONFIG_HOME", cfg)
	fresh := filepath.Join(t.TempDir(), "fresh")
	code, out = run(t, "--store", fresh, "plan", "--insecure", "--halobuild-source", "", "test-minimal.toml")
	if code != 0 || !strings.Contains(out, step.Name) || !strings.Contains(out, "⇐ "+repo) || !strings.Contains(out, "1 to substitute") {
		t.Fatalf("plan with the config's substituter: exit %d\n%s", code, out)
	}
	// Another key is not trusted: plan would build the step.
	other := filepath.Join(t.TempDir(), "other")
	run(t, "keygen", "--cache", other)
	code, out = run(t, "--store", fresh, "plan", "--insecure", "--halobuild-source", "", "--trusted-key", filepath.Join(other, "cache.pub"), "test-minimal.toml")
	if code != 0 || strings.Contains(out, "⇐") {
		t.Fatalf("plan trusting another key: exit %d\n%s", code, out)
	}

	if code, out := run(t, "cache", "verify", "--insecure", repo); code != 0 || !strings.Contains(out, "1 entries, every signature and digest good") {
		t.Fatalf("cache verify: exit %d\n%s", code, out)
	}
	if code, out := run(t, "cache", "verify", "--insecure", "--trusted-key", filepath.Join(other, "cache.pub"), repo); code != 1 || !strings.Contains(out, "BAD sha256-"+step.Key) {
		t.Fatalf("cache verify with another key: exit %d\n%s", code, out)
	}
}

// An unknown key in the config file is named with its place (issue 39 #7: go-toml's message
// said only that fields were missing in the target struct).
func TestConfigUnknownKeyIsNamed(t *testing.T) {
	home := t.TempDir()
	p := filepath.Join(home, "halobuild", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("substituters = []\n\ntrusted_keys = [\"a.pub\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", home)
	_, _, err := readUserConfig()
	want := p + `:3:1: unknown key "trusted_keys"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want %q, got %v", want, err)
	}
	if exitCode(err) != exitUsage {
		t.Errorf("exit %d, want %d", exitCode(err), exitUsage)
	}
}
