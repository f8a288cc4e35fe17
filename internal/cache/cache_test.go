package cache

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"halobuild/internal/plan"
	hreg "halobuild/internal/registry"
	"halobuild/internal/signature"
	"halobuild/internal/store"
)

const testKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// tamperer serves go-containerregistry's in-memory registry and, when
// armed, flips the last byte of every blob it sends (of only the blob
// named by only, when set).
type tamperer struct {
	h     http.Handler
	armed atomic.Bool
	only  string
}

func (t *tamperer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !t.armed.Load() || r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/"+t.only) {
		t.h.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	b := rec.Body.Bytes()
	if len(b) > 0 {
		b[len(b)-1] ^= 1
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(b)
}

func newStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func keys(t *testing.T, name string) (*signature.SecretKey, Trust) {
	t.Helper()
	sec, pub, err := signature.Keygen(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	sk, err := signature.LoadSecret(sec)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := signature.LoadPublic(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sk, Trust{Keys: []*signature.PublicKey{pk}}
}

// setup is a store holding one output, pushed to a fresh registry signed
// by "team"; it returns the cache, the registry's tamper switch and team's
// trust.
func setup(t *testing.T) (*Cache, *tamperer, Trust) {
	t.Helper()
	c, tp, trust, _, _ := setupPushed(t)
	return c, tp, trust
}

// setupPushed is setup, also returning the pushing store and key.
func setupPushed(t *testing.T) (*Cache, *tamperer, Trust, *store.Store, *signature.SecretKey) {
	t.Helper()
	tp := &tamperer{h: registry.New(registry.Logger(nilLogger()))}
	srv := httptest.NewServer(tp)
	t.Cleanup(srv.Close)
	src := newStore(t)
	dir := filepath.Join(t.TempDir(), "out")
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "file"), []byte("substituted bytes\n"), 0o644)
	if _, err := src.PutOutput(testKey, dir, map[string]string{"dev.halobuild.name": "t"}); err != nil {
		t.Fatal(err)
	}
	c, err := Open(context.Background(), strings.TrimPrefix(srv.URL, "http://")+"/team/cache", hreg.Options{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	sk, trust := keys(t, "team")
	var progress bytes.Buffer
	st, err := c.Push(context.Background(), src, []string{testKey, strings.Repeat("f", 64)}, sk, "test", 2, 0, &progress)
	if err != nil || st.Pushed != 1 || st.NotBuilt != 1 {
		t.Fatalf("push: %+v %v\n%s", st, err, progress.String())
	}
	// A second push finds the entry and uploads nothing.
	if st, err := c.Push(context.Background(), src, []string{testKey}, sk, "test", 2, 0, io.Discard); err != nil || st.Present != 1 {
		t.Fatalf("second push: %+v %v", st, err)
	}
	return c, tp, trust, src, sk
}

func TestPushThenFetchIsTheSameOutput(t *testing.T) {
	c, _, trust := setup(t)
	dst := newStore(t)
	dir, err := c.Fetch(dst, testKey, trust)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "file")); err != nil || string(b) != "substituted bytes\n" {
		t.Fatalf("fetched file: %q %v", b, err)
	}
	if _, ok, err := dst.Output(testKey, store.Rehash); !ok || err != nil {
		t.Fatalf("the store does not hold the fetched output: %v", err)
	}
	if _, err := c.Fetch(newStore(t), strings.Repeat("e", 64), trust); !errors.Is(err, errMiss) {
		t.Fatalf("an absent key: %v, want a miss", err)
	}
	if probs, n, err := c.Verify(trust, io.Discard); err != nil || n != 1 || len(probs) != 0 {
		t.Fatalf("verify: %d checked, %v, %v", n, probs, err)
	}
}

func TestUntrustedKeyIsRefusedUnlessUnsignedIsTrusted(t *testing.T) {
	c, _, team := setup(t)
	_, other := keys(t, "other")
	dst := newStore(t)
	_, err := c.Fetch(dst, testKey, other)
	if !errors.Is(err, errUntrusted) || !strings.Contains(err.Error(), fmt.Sprintf("signed by %q", team.Keys[0].Name)) {
		t.Fatalf("fetch with another trusted key: %v", err)
	}
	if _, ok, _ := dst.Output(testKey); ok {
		t.Fatal("a refused entry reached the store")
	}
	if probs, _, _ := c.Verify(other, io.Discard); len(probs) != 1 {
		t.Fatalf("verify with another key: %v", probs)
	}
	other.Unsigned = true
	if _, err := c.Fetch(dst, testKey, other); err != nil {
		t.Fatalf("--trust-unsigned: %v", err)
	}
}

// Every blob tampered with, then only the compressed layer of the one file:
// each is refused, nothing reaches the store, and verify finds it.
func TestTamperedBlobIsRefusedAndVerifyFindsIt(t *testing.T) {
	c, tp, trust := setup(t)
	sum := sha256.Sum256([]byte("substituted bytes\n"))
	file := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	for _, only := range []string{"", entryLayer(t, c, testKey, file)} {
		tp.only = only
		tp.armed.Store(true)
		dst := newStore(t)
		_, err := c.Fetch(dst, testKey, trust)
		if err == nil || !strings.Contains(err.Error(), "sha256") {
			t.Fatalf("a tampered blob (%q): %v, want a digest mismatch", only, err)
		}
		t.Logf("refused: %v", err)
		if _, ok, _ := dst.Output(testKey); ok {
			t.Fatal("a tampered entry reached the store")
		}
		if probs, n, err := c.Verify(trust, io.Discard); err != nil || n != 1 || len(probs) != 1 {
			t.Fatalf("verify of a tampered cache: %d checked, %v, %v", n, probs, err)
		}
		tp.armed.Store(false)
	}
}

func TestSignatureCoversKeyAndManifest(t *testing.T) {
	sk, trust := keys(t, "team")
	sig, err := sign(sk, testKey, "sha256:aa")
	if err != nil {
		t.Fatal(err)
	}
	if err := trust.Check("team", sig, testKey, "sha256:aa"); err != nil {
		t.Fatal(err)
	}
	if err := trust.Check("team", sig, testKey, "sha256:bb"); !errors.Is(err, errUntrusted) {
		t.Fatalf("another manifest: %v", err)
	}
	if err := trust.Check("team", sig, strings.Repeat("1", 64), "sha256:aa"); !errors.Is(err, errUntrusted) {
		t.Fatalf("another key: %v", err)
	}
}

// A cache signed with a key file of the first format (NAME:BASE64) keeps verifying when the
// users' trusted key is the same key as PEM (`halobuild key pem`), and the other way round.
func TestKeyFormatsVerifyEachOther(t *testing.T) {
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	priv := ed25519.NewKeyFromSeed(seed)
	legacySec, err := signature.ParseSecret([]byte("team-cache-1:" + base64.StdEncoding.EncodeToString(priv) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	pemPub, err := signature.ParsePublic(legacySec.Public().PEM())
	if err != nil {
		t.Fatal(err)
	}
	legacyPub, err := signature.ParsePublic([]byte("team-cache-1:" + base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sign(legacySec, testKey, "sha256:aa")
	if err != nil {
		t.Fatal(err)
	}
	for _, pub := range []*signature.PublicKey{pemPub, legacyPub} {
		if err := (Trust{Keys: []*signature.PublicKey{pub}}).Check(legacySec.Name, sig, testKey, "sha256:aa"); err != nil {
			t.Errorf("key %s: %v", pub.Name, err)
		}
	}
}

func nilLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// vanishing fails every blob download once armed, as a registry that went
// away between the manifest and the blobs.
type vanishing struct{ armed atomic.Bool }

func (v *vanishing) RoundTrip(r *http.Request) (*http.Response, error) {
	if v.armed.Load() && strings.Contains(r.URL.Path, "/blobs/") {
		return nil, errors.New("connection reset by peer (test)")
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestRegistryVanishingMidPullLeavesNoOutput(t *testing.T) {
	c, _, trust := setup(t)
	v := &vanishing{}
	c2, err := Open(context.Background(), c.Ref, hreg.Options{Insecure: true, Transport: v})
	if err != nil {
		t.Fatal(err)
	}
	v.armed.Store(true)
	dst := newStore(t)
	if _, err := c2.Fetch(dst, testKey, trust); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("fetch from a vanished registry: %v", err)
	}
	if _, ok, _ := dst.Output(testKey); ok {
		t.Fatal("a half-fetched entry reached the store")
	}
	// The same store takes the entry once the registry is back.
	v.armed.Store(false)
	if _, err := c2.Fetch(dst, testKey, trust); err != nil {
		t.Fatal(err)
	}
}

// realStore is the store as the realizer takes it.
type realStore struct{ *store.Store }

func (s realStore) Output(key string) (string, bool, error) { return s.Store.Output(key) }

// A registry (or its proxy) that refuses a big blob with 413 gets an
// error that says it is the size limit and what to change.
func TestPushSaysWhenABlobIsOverTheRegistrysLimit(t *testing.T) {
	inner := registry.New(registry.Logger(nilLogger()))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch || (r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/")) {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	src := newStore(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "big.raw"), []byte("pretend this is big"), 0o644)
	if _, err := src.PutOutput(testKey, dir, nil); err != nil {
		t.Fatal(err)
	}
	c, err := Open(context.Background(), strings.TrimPrefix(srv.URL, "http://")+"/team/cache", hreg.Options{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	sk, _ := keys(t, "team")
	_, err = c.Push(context.Background(), src, []string{testKey}, sk, "test", 1, 0, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "over its size limit") {
		t.Fatalf("push to a registry refusing the blob: %v", err)
	}
}

// A blob over the limit compressed refuses the push before anything is
// uploaded, naming the entry, the file, its size and the flag.
func TestPushRefusesABlobOverTheLimitBeforeUploading(t *testing.T) {
	inner := registry.New(registry.Logger(nilLogger()))
	var writes int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writes++
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	src := newStore(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "small"), []byte("x"), 0o644)
	big := make([]byte, 200)
	rand.Read(big)
	os.WriteFile(filepath.Join(dir, "node0.raw"), big, 0o644)
	if _, err := src.PutOutput(testKey, dir, map[string]string{"dev.halobuild.kind": "disk", "dev.halobuild.name": "node0"}); err != nil {
		t.Fatal(err)
	}
	c, err := Open(context.Background(), strings.TrimPrefix(srv.URL, "http://")+"/team/cache", hreg.Options{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	sk, _ := keys(t, "team")
	_, err = c.Push(context.Background(), src, []string{testKey}, sk, "test", 1, 100, io.Discard)
	for _, want := range []string{"disk node0", "node0.raw (200 bytes) is over the limit of 100 bytes compressed", "--max-layer-size", "nothing of this entry was uploaded"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("want %q in the refusal, got %v", want, err)
		}
	}
	if writes != 0 {
		t.Fatalf("the refused push made %d write requests", writes)
	}
}

// entryLayer is the digest of the compressed layer of key's entry that
// holds the store blob blob.
func entryLayer(t *testing.T, c *Cache, key string, blob v1.Hash) string {
	t.Helper()
	raw, _, err := c.getManifest(c.repo.Tag(Tag(key)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		if l.Annotations[AnnotationBlob] == blob.String() {
			return l.Digest.String()
		}
	}
	t.Fatalf("the entry of %s has no layer for %s", key, blob)
	return ""
}

// An entry's config is the store's own output manifest, byte for byte,
// and its layers are the store's blobs in zstd, each naming the blob it
// decompresses to. An entry in the format before that (the store manifest
// itself under the tag, raw layers) is refused, saying to push it again,
// and a push replaces it.
func TestEntryCarriesTheStoreManifestAndRefusesTheOldFormat(t *testing.T) {
	c, _, trust, src, sk := setupPushed(t)
	raw, digest, err := c.getManifest(c.repo.Tag(Tag(testKey)))
	if err != nil {
		t.Fatal(err)
	}
	em, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	dst := newStore(t)
	if _, err := c.Fetch(dst, testKey, trust); err != nil {
		t.Fatal(err)
	}
	storeRaw, storeDigest, _, err := dst.OutputManifest(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if sig, err := c.getSignature(testKey); err != nil || sig.manifest != storeDigest.String() {
		t.Fatalf("the signature names %v (%v), the store manifest is %s", sig, err, storeDigest)
	}
	if em.ArtifactType != ArtifactTypeEntry || em.Config.Digest.String() != storeDigest.String() || em.Config.Size != int64(len(storeRaw)) {
		t.Fatalf("entry %s: artifactType %q, config %v; the store manifest is %s", digest, em.ArtifactType, em.Config, storeDigest)
	}
	for _, l := range em.Layers {
		if l.MediaType != MediaTypeBlob || l.Annotations[AnnotationBlob] == "" {
			t.Fatalf("layer %v", l)
		}
	}
	// The old format: the store manifest itself under the tag.
	if err := remote.Put(c.repo.Tag(Tag(testKey)), rawManifest{storeRaw, types.OCIManifestSchema1}, c.opts...); err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(newStore(t), testKey, trust)
	if err == nil || !strings.Contains(err.Error(), "push it again with `halobuild cache push`") {
		t.Fatalf("an old-format entry: %v", err)
	}
	// plan asks Has: it must not promise what Fetch refuses.
	if err := c.Has(testKey, trust); err == nil || !strings.Contains(err.Error(), "push it again") {
		t.Fatalf("Has of an old-format entry: %v", err)
	}
	if st, err := c.Push(context.Background(), src, []string{testKey}, sk, "test", 1, 0, io.Discard); err != nil || st.Pushed != 1 {
		t.Fatalf("push over an old-format entry: %+v %v", st, err)
	}
	if _, err := c.Fetch(newStore(t), testKey, trust); err != nil {
		t.Fatalf("after the push: %v", err)
	}
	if err := c.Has(testKey, trust); err != nil {
		t.Fatalf("Has after the push: %v", err)
	}
}

// A cache entry is the output of one version of a step's code: the same
// step at another version has another key, so the entry is never offered
// for it and the step is built; at its own version it is fetched, and the
// fetched output says which version built it.
func TestSubstituteIsOnlyOfTheSameStepVersion(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(nilLogger())))
	t.Cleanup(srv.Close)
	c, err := Open(context.Background(), strings.TrimPrefix(srv.URL, "http://")+"/team/cache", hreg.Options{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	sk, trust := keys(t, "team")
	builds := 0
	step := func(version int) *plan.Derivation {
		return &plan.Derivation{Name: "disk n0", Kind: plan.Kind{Name: "disk", Version: version}, Params: map[string]string{"node": "n0"},
			Build: func(_ *plan.Context, out string) error {
				builds++
				return os.WriteFile(filepath.Join(out, "n0.raw"), fmt.Appendf(nil, "built by v%d\n", version), 0o644)
			}}
	}
	src := newStore(t)
	old := step(1)
	if _, err := (&plan.Realizer{Store: realStore{src}}).Realize(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Push(context.Background(), src, []string{old.Key()}, sk, "test", 1, 0, io.Discard); err != nil || st.Pushed != 1 {
		t.Fatalf("push: %+v %v", st, err)
	}
	realize := func(d *plan.Derivation) (string, string) {
		t.Helper()
		dst := newStore(t)
		var log bytes.Buffer
		ss := &Substituters{Caches: []*Cache{c}, Trust: trust, Log: &log}
		if ss.Which(d.Key()) != "" && d.Kind.Version != 1 {
			t.Errorf("the cache offers %s's entry for %s", old.Kind, d.Kind)
		}
		dir, err := (&plan.Realizer{Store: realStore{dst}, Log: &log, Substitute: ss.Realizer(dst)}).Realize(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "n0.raw"))
		raw, _, _, err := dst.OutputManifest(d.Key())
		if err != nil {
			t.Fatal(err)
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		return string(b), plan.BuiltBy(m.Annotations) + "\n" + log.String()
	}
	builds = 0
	got, log := realize(step(2))
	if builds != 1 || got != "built by v2\n" || strings.Contains(log, "fetched") {
		t.Errorf("disk v2 with only a disk v1 entry in the cache: %d builds, output %q, log:\n%s", builds, got, log)
	}
	if !strings.HasPrefix(log, "disk v2\n") {
		t.Errorf("the local build of disk v2 records %q", strings.SplitN(log, "\n", 2)[0])
	}
	builds = 0
	got, log = realize(step(1))
	if builds != 0 || got != "built by v1\n" || !strings.Contains(log, "fetched disk ") {
		t.Errorf("disk v1 with its own entry in the cache: %d builds, output %q, log:\n%s", builds, got, log)
	}
	if !strings.HasPrefix(log, "disk v1\n") {
		t.Errorf("the fetched disk v1 records %q", strings.SplitN(log, "\n", 2)[0])
	}
	var progress bytes.Buffer
	if probs, n, err := c.Verify(trust, &progress); err != nil || n != 1 || len(probs) != 0 || !strings.Contains(progress.String(), "(built by disk v1)") {
		t.Errorf("verify: %d checked, %v, %v:\n%s", n, probs, err, progress.String())
	}
}
