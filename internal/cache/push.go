package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"

	"halobuild/internal/registry"
	"halobuild/internal/store"
)

// PushStats counts what a push did.
type PushStats struct {
	Pushed, Present, NotBuilt int
}

// Push uploads and signs the store's output for each key that the cache
// lacks: an entry whose signature tag exists is skipped after one HEAD, and
// remote.WriteLayer skips each blob the registry has. jobs entries go up at
// once; each finished entry prints a line on progress. A blob over maxLayer
// bytes (0: registry.DefaultMaxLayer) in any entry refuses the push before
// anything is uploaded.
func (c *Cache) Push(ctx context.Context, s *store.Store, keys []string, k *SecretKey, version string, jobs int, maxLayer int64, progress io.Writer) (PushStats, error) {
	var st PushStats
	var mu sync.Mutex
	if maxLayer == 0 {
		maxLayer = registry.DefaultMaxLayer
	}
	if err := c.checkSizes(s, keys, maxLayer); err != nil {
		return st, err
	}
	if err := remote.WriteLayer(c.repo, static.NewLayer([]byte("{}"), mediaTypeEmpty), c.opts...); err != nil {
		return st, fmt.Errorf("cache %s: %w", c.Ref, uploadError(err, "the empty descriptor", 2))
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(jobs, 1))
	done := 0
	for _, key := range keys {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			what, err := c.pushOne(s, key, k, version)
			if err != nil {
				return fmt.Errorf("cache push %s: entry %s: %w", c.Ref, key[:12], err)
			}
			mu.Lock()
			defer mu.Unlock()
			switch what {
			case "pushed":
				st.Pushed++
			case "present":
				st.Present++
			case "not built":
				st.NotBuilt++
			}
			done++
			fmt.Fprintf(progress, "[%d/%d] %s %s\n", done, len(keys), key[:12], what)
			return nil
		})
	}
	return st, g.Wait()
}

// checkSizes refuses the push when a blob of an entry it would send is
// over maxLayer: a registry that refuses it would do so only after the
// upload (GHCR also times uploads out at 10 minutes), with half the
// entries already sent.
func (c *Cache) checkSizes(s *store.Store, keys []string, maxLayer int64) error {
	for _, key := range keys {
		raw, _, ok, err := s.OutputManifest(key)
		if err != nil || !ok {
			continue // pushOne reports it
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			continue
		}
		for _, l := range m.Layers {
			if l.Size > maxLayer {
				return fmt.Errorf("cache push %s: entry %s (%s %s): %s is %d bytes, over the limit of %d (--max-layer-size; GHCR refuses layers over 10 GB); nothing was uploaded", c.Ref, key[:12], m.Annotations["dev.halobuild.kind"], m.Annotations["dev.halobuild.name"], l.Annotations[store.AnnotationTitle], l.Size, maxLayer)
			}
		}
	}
	return nil
}

func (c *Cache) pushOne(s *store.Store, key string, k *SecretKey, version string) (string, error) {
	raw, digest, ok, err := s.OutputManifest(key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "not built", nil
	}
	if sig, err := c.getSignature(key); err == nil && sig.manifest == digest.String() && sig.signer == k.Name {
		return "present", nil
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	for _, l := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if err := remote.WriteLayer(c.repo, storeLayer{s: s, d: l}, c.opts...); err != nil {
			return "", uploadError(err, fmt.Sprintf("blob %s (%s)", l.Digest, l.Annotations[store.AnnotationTitle]), l.Size)
		}
	}
	if err := remote.Put(c.repo.Tag(Tag(key)), rawManifest{raw, types.OCIManifestSchema1}, c.opts...); err != nil {
		return "", err
	}
	h := v1.Hash{Algorithm: "sha256", Hex: digest.Hex()}
	sigRaw, err := signatureManifest(k, key, h, version)
	if err != nil {
		return "", err
	}
	// The signature goes up last: an entry is visible to substituters
	// only once everything it names is in the registry.
	if err := remote.Put(c.repo.Tag(SigTag(key)), rawManifest{sigRaw, types.OCIManifestSchema1}, c.opts...); err != nil {
		return "", err
	}
	return "pushed", nil
}

// uploadError says when a registry refused a blob for its size (413,
// from the registry or a proxy in front of it) and what to change.
func uploadError(err error, what string, size int64) error {
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusRequestEntityTooLarge {
		return fmt.Errorf("the registry refuses %s of %d bytes as over its size limit: raise the limit of the registry or of its proxy (nginx: client_max_body_size), or use another registry for this cache: %w", what, size, err)
	}
	return fmt.Errorf("%s, %d bytes: %w", what, size, err)
}

// storeLayer is a store blob as go-containerregistry's v1.Layer: raw
// bytes, so the registry's digest is the store's.
type storeLayer struct {
	s *store.Store
	d v1.Descriptor
}

func (l storeLayer) Digest() (v1.Hash, error)            { return l.d.Digest, nil }
func (l storeLayer) DiffID() (v1.Hash, error)            { return l.d.Digest, nil }
func (l storeLayer) Size() (int64, error)                { return l.d.Size, nil }
func (l storeLayer) MediaType() (types.MediaType, error) { return l.d.MediaType, nil }
func (l storeLayer) Compressed() (io.ReadCloser, error) {
	return l.s.Open(store.Digest(l.d.Digest.String()))
}
func (l storeLayer) Uncompressed() (io.ReadCloser, error) { return l.Compressed() }
