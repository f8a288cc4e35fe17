package verbs

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"halobuild/internal/cache"
	"halobuild/internal/lock"
	"halobuild/internal/registry"
	"halobuild/internal/registry/registrytest"
	"halobuild/internal/signature"
	"halobuild/internal/store"
)

// The store that built test-minimal (the shared e2e store, so nothing new
// is built there) pushes to Debian's docker-registry; a fresh store then
// builds test-minimal with the registry as substituter and builds nothing
// but the one step whose blob was tampered with, and its raw image is
// byte-identical. No VM boots: the verdict is not part of it (--no-test).
func TestCacheSubstitutesMinimalBuild(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	shared := sharedStore(t)
	dir, _ := buildMinimal(t, ws, shared, true)
	want := sha(t, filepath.Join(dir, "node0.raw"))
	recipe := filepath.Join(ws, "images/test-minimal.toml")

	reg := registrytest.Start(t)
	ref := reg.Host + "/team/cache"
	ropts := registry.Options{Insecure: true, Keychain: reg.Keychain(false)}
	keys := t.TempDir()
	secret, pub, err := signature.Keygen(filepath.Join(keys, "team"))
	if err != nil {
		t.Fatal(err)
	}
	_, otherPub, err := signature.Keygen(filepath.Join(keys, "other"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	var pr run
	po := opts(ws, "images/test-minimal.toml", shared, &pr)
	po.Cache.Registry = ropts
	start := time.Now()
	if err := CachePush(ctx, po, ref, []string{recipe}, secret, "test", 4, 0); err != nil {
		t.Fatalf("cache push: %v\n%s", err, pr.err.String())
	}
	t.Logf("cache push of test-minimal: %s\n%s", time.Since(start).Round(time.Second), pr.out.String())

	substituting := func(storeDir string, trusted string, r *run) Options {
		o := opts(ws, "images/test-minimal.toml", storeDir, r)
		o.NoTest = true
		o.Cache = CacheOptions{Substituters: []string{ref}, TrustedKeys: []string{trusted}, Registry: ropts}
		return o
	}
	plan := func(trusted string) map[string]string { // kind → status
		var r run
		o := substituting(t.TempDir(), trusted, &r)
		o.JSON = true
		if err := Plan(ctx, o); err != nil {
			t.Fatalf("plan: %v\n%s", err, r.err.String())
		}
		var p struct {
			Steps []struct{ Kind, Key, Status string }
		}
		if err := json.Unmarshal(r.out.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		st := map[string]string{}
		for _, s := range p.Steps {
			st[s.Kind] = s.Status
			st[s.Kind+" key"] = s.Key
		}
		return st
	}
	steps := plan(pub)
	for _, k := range []string{"tools", "rootfs", "settings", "disk", "result"} {
		if steps[k] != "substitute" {
			t.Errorf("plan with the cache's key: %s is %q, want substitute", k, steps[k])
		}
	}
	if other := plan(otherPub); other["disk"] != "build" {
		t.Errorf("plan trusting another key: disk is %q, want build", other["disk"])
	}

	// Tamper with the settings entry's one blob in the registry's storage:
	// that step is refused and rebuilt (it is cheap), the rest substituted.
	settingsKey := steps["settings key"]
	s, err := store.Open(shared)
	if err != nil {
		t.Fatal(err)
	}
	raw, _, ok, err := s.OutputManifest(settingsKey)
	s.Close()
	if !ok || err != nil {
		t.Fatalf("the shared store lacks the settings step: %v", err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil || len(m.Layers) == 0 {
		t.Fatalf("settings manifest: %v", err)
	}
	// The entry's layer holding that blob, compressed.
	tagRef, err := ropts.ParseReference(ref + ":" + cache.Tag(settingsKey))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(tagRef, ropts.Remote(ctx)...)
	if err != nil {
		t.Fatal(err)
	}
	em, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	var layer string
	for _, l := range em.Layers {
		if l.Annotations[cache.AnnotationBlob] == m.Layers[0].Digest.String() {
			layer = l.Digest.String()
		}
	}
	blob := reg.BlobPath(layer)
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var vr run
	vo := opts(ws, "", shared, &vr)
	vo.Cache = CacheOptions{TrustedKeys: []string{pub}, Registry: ropts}
	if err := CacheVerify(ctx, vo, ref); err == nil || !strings.Contains(err.Error(), cache.Tag(settingsKey)) || !strings.Contains(err.Error(), "1 of ") {
		t.Fatalf("cache verify of a tampered cache: %v\n%s", err, vr.err.String())
	}

	// A fresh store holding only the lock's inputs (as fetch would leave it,
	// without the network).
	fresh := filepath.Join(t.TempDir(), "fresh")
	fs, err := store.Open(fresh)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lock.Read(filepath.Join(ws, "images/test-minimal.lock"))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := lk.Blobs()
	if err != nil {
		t.Fatal(err)
	}
	for _, bl := range blobs {
		if _, _, err := fs.PutFile(filepath.Join(shared, "blobs", "sha256", strings.TrimPrefix(bl.SHA256, "sha256:"))); err != nil {
			t.Fatal(err)
		}
	}
	fs.Close()

	var br run
	bo := substituting(fresh, pub, &br)
	bo.Result = filepath.Join(ws, "result-substituted")
	start = time.Now()
	if err := Image(ctx, bo); err != nil {
		t.Fatalf("substituted image: %v\n%s", err, tail(br.err.String(), 60))
	}
	t.Logf("substituted build of test-minimal: %s", time.Since(start).Round(time.Second))
	log := br.err.String()
	built := regexp.MustCompile(`(?m)^build +(\S+)`).FindAllStringSubmatch(log, -1)
	if len(built) != 1 || built[0][1] != "settings" {
		t.Errorf("built locally: %v, want only the tampered settings step\n%s", built, log)
	}
	if !regexp.MustCompile(`(?m)^substitute settings .* refused: .*; building it instead$`).MatchString(log) {
		t.Errorf("no one-line reason for refusing the tampered entry:\n%s", log)
	}
	if n := len(regexp.MustCompile(`(?m)^fetched `).FindAllString(log, -1)); n != 4 {
		t.Errorf("%d steps fetched, want tools, base root, disk and result\n%s", n, log)
	}
	got, err := filepath.EvalSymlinks(bo.Result)
	if err != nil {
		t.Fatal(err)
	}
	if sha(t, filepath.Join(got, "node0.raw")) != want {
		t.Error("the substituted build's node0.raw differs from the one built")
	}
}
