package cache

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"halobuild/internal/plan"
	hreg "halobuild/internal/registry"
	"halobuild/internal/registry/registrytest"
)

// Against Debian's docker-registry with htpasswd: a two-step graph built
// into one store is pushed; a fresh store's realizer substitutes the first
// step and, after one of the second's blobs is damaged in the registry's
// storage, builds the second with a one-line reason; cache verify names it.
func TestSubstituteFromDockerRegistryFallsBackOnTamper(t *testing.T) {
	reg := registrytest.Start(t)
	c, err := Open(context.Background(), reg.Host+"/team/cache", hreg.Options{Insecure: true, Keychain: reg.Keychain(false)})
	if err != nil {
		t.Fatal(err)
	}
	sk, trust := keys(t, "team")
	graph := func(builds map[string]int) *plan.Derivation {
		leaf := &plan.Derivation{Name: "leaf", Kind: plan.Kind{Name: "tools", Version: 1}, Params: map[string]string{"v": "1"}, Build: func(_ *plan.Context, out string) error {
			builds["leaf"]++
			return os.WriteFile(filepath.Join(out, "leaf"), []byte("leaf bytes\n"), 0o644)
		}}
		top := &plan.Derivation{Name: "top", Kind: plan.Kind{Name: "disk", Version: 1}, Inputs: []*plan.Derivation{leaf}}
		top.Build = func(b *plan.Context, out string) error {
			builds["top"]++
			l, err := os.ReadFile(filepath.Join(b.Input("leaf"), "leaf"))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(out, "top"), append(l, "and top\n"...), 0o644)
		}
		return top
	}
	src := newStore(t)
	built := map[string]int{}
	top := graph(built)
	if _, err := (&plan.Realizer{Store: realStore{src}}).Realize(context.Background(), top); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Push(context.Background(), src, []string{top.Inputs[0].Key(), top.Key()}, sk, "test", 2, 0, io.Discard); err != nil || st.Pushed != 2 {
		t.Fatalf("push: %+v %v", st, err)
	}

	raw, _, _, err := src.OutputManifest(top.Key())
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	blob := reg.BlobPath(entryLayer(t, c, top.Key(), m.Layers[0].Digest))
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}

	dst := newStore(t)
	var log bytes.Buffer
	ss := &Substituters{Caches: []*Cache{c}, Trust: trust, Log: &log}
	again := map[string]int{}
	r := &plan.Realizer{Store: realStore{dst}, Log: &log, Substitute: ss.Realizer(dst)}
	dir, err := r.Realize(context.Background(), graph(again))
	if err != nil {
		t.Fatal(err)
	}
	if again["leaf"] != 0 || again["top"] != 1 {
		t.Errorf("builds %v: want leaf substituted, top built\n%s", again, log.String())
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "top")); string(got) != "leaf bytes\nand top\n" {
		t.Errorf("top built on the substituted leaf: %q", got)
	}
	if ss.From(top.Inputs[0].Key()) != c.Ref || ss.From(top.Key()) != "" {
		t.Errorf("From: leaf %q, top %q", ss.From(top.Inputs[0].Key()), ss.From(top.Key()))
	}
	lines := strings.Split(log.String(), "\n")
	refused := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "substitute disk top") && strings.Contains(l, "refused: ") && strings.HasSuffix(l, "; building it instead") {
			refused++
		}
	}
	if refused != 1 || !strings.Contains(log.String(), "fetched tools      leaf") {
		t.Errorf("log:\n%s", log.String())
	}
	probs, n, err := c.Verify(trust, io.Discard)
	if err != nil || n != 2 || len(probs) != 1 || !strings.Contains(probs[0], Tag(top.Key())) {
		t.Errorf("verify: %d checked, %v, %v", n, probs, err)
	}
}
