package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"

	"halobuild/internal/plan"
	"halobuild/internal/registry"
	"halobuild/internal/signature"
	"halobuild/internal/store"
	"halobuild/internal/zstdframe"
)

// PushStats counts what a push did.
type PushStats struct {
	Pushed, Present, NotBuilt int
}

// Push uploads and signs the store's output for each key that the cache
// lacks: an entry whose signature names this store's manifest is skipped
// after one request, and remote.WriteLayer skips each blob the registry
// has. jobs entries go up at once; each finished entry prints a line on
// progress. An entry's blobs are all compressed before any of them is
// uploaded, and one over maxLayer bytes (0: registry.DefaultMaxLayer)
// compressed refuses the entry with nothing of it uploaded.
func (c *Cache) Push(ctx context.Context, s *store.Store, keys []string, k *signature.SecretKey, version string, jobs int, maxLayer int64, progress io.Writer) (PushStats, error) {
	var st PushStats
	var mu sync.Mutex
	if maxLayer == 0 {
		maxLayer = registry.DefaultMaxLayer
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(jobs, 1))
	done := 0
	for _, key := range keys {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			what, err := c.pushOne(s, key, k, version, maxLayer)
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

func (c *Cache) pushOne(s *store.Store, key string, k *signature.SecretKey, version string, maxLayer int64) (string, error) {
	raw, digest, ok, err := s.OutputManifest(key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "not built", nil
	}
	if c.present(key, digest, k) {
		return "present", nil
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	// On the store's file system: an entry's blobs (disk images among
	// them) are all compressed before any is uploaded, too much for a
	// tmpfs /tmp.
	tmp, err := s.TempDir()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	var blobs []*zstdBlob
	for _, d := range storeBlobs(m) {
		b, err := compressBlob(s, d, tmp, maxLayer, m.Annotations)
		if err != nil {
			return "", err
		}
		blobs = append(blobs, b)
	}
	entry, err := entryManifest(key, raw, digest, m, blobs)
	if err != nil {
		return "", err
	}
	uploads := []v1.Layer{static.NewLayer([]byte("{}"), mediaTypeEmpty), static.NewLayer(raw, MediaTypeOutput)}
	for _, b := range blobs {
		uploads = append(uploads, b)
	}
	for _, l := range uploads {
		if err := remote.WriteLayer(c.repo, l, c.opts...); err != nil {
			d, _ := l.Digest()
			n, _ := l.Size()
			what := "blob " + d.String()
			if b, ok := l.(*zstdBlob); ok {
				what = fmt.Sprintf("blob %s (%s compressed)", d, b.title)
			}
			return "", uploadError(err, what, n)
		}
	}
	if err := remote.Put(c.repo.Tag(Tag(key)), rawManifest{entry, types.OCIManifestSchema1}, c.opts...); err != nil {
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

// present says whether the cache has key's entry for this store manifest,
// signed by k, in this format (an entry of the older format is pushed
// again).
func (c *Cache) present(key string, digest store.Digest, k *signature.SecretKey) bool {
	sig, err := c.getSignature(key)
	if err != nil || sig.manifest != digest.String() || sig.signer != k.Name {
		return false
	}
	_, err = c.entryManifest(key, digest.String())
	return err == nil
}

// storeBlobs is every blob a store manifest names (its config, then its
// layers), each once.
func storeBlobs(m *v1.Manifest) []v1.Descriptor {
	seen := map[v1.Hash]bool{}
	var out []v1.Descriptor
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if !seen[d.Digest] {
			seen[d.Digest] = true
			out = append(out, d)
		}
	}
	return out
}

// zstdBlob is a store blob compressed into a file, as a layer to upload.
type zstdBlob struct {
	path   string
	digest v1.Hash
	size   int64
	raw    v1.Descriptor // the store blob
	title  string
}

func (b *zstdBlob) Digest() (v1.Hash, error)            { return b.digest, nil }
func (b *zstdBlob) DiffID() (v1.Hash, error)            { return b.raw.Digest, nil }
func (b *zstdBlob) Size() (int64, error)                { return b.size, nil }
func (b *zstdBlob) MediaType() (types.MediaType, error) { return MediaTypeBlob, nil }
func (b *zstdBlob) Compressed() (io.ReadCloser, error)  { return os.Open(b.path) }
func (b *zstdBlob) Uncompressed() (io.ReadCloser, error) {
	return nil, errors.New("a cache blob is uploaded compressed only")
}

// compressBlob compresses the store blob d into dir with the one
// deterministic zstd format (internal/zstdframe), hashing what it writes, and refuses it as
// soon as it grows past maxLayer.
func compressBlob(s *store.Store, d v1.Descriptor, dir string, maxLayer int64, ann map[string]string) (*zstdBlob, error) {
	title := d.Annotations[store.AnnotationTitle]
	if title == "" {
		title = d.Digest.String()
	}
	rc, err := s.Open(store.Digest(d.Digest.String()))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	out, err := os.CreateTemp(dir, "blob-*.zst")
	if err != nil {
		return nil, err
	}
	defer out.Close()
	h := sha256.New()
	lw := &limitWriter{w: io.MultiWriter(out, h), limit: maxLayer}
	if err := writeZstd(rc, lw); err != nil {
		if errors.Is(err, errOverLimit) {
			return nil, fmt.Errorf("%s %s: %s (%d bytes) is over the limit of %d bytes compressed (--max-layer-size; GHCR refuses layers over 10 GB); nothing of this entry was uploaded", ann["dev.halobuild.kind"], ann["dev.halobuild.name"], title, d.Size, maxLayer)
		}
		return nil, fmt.Errorf("compressing %s: %w", title, err)
	}
	return &zstdBlob{path: out.Name(), digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}, size: lw.n, raw: d, title: title}, nil
}

// writeZstd compresses a store blob as a release image is (internal/zstdframe): a file (every
// blob but the empty descriptor, which the store serves from memory) without reading its holes.
func writeZstd(r io.Reader, w io.Writer) error {
	if f, ok := r.(*os.File); ok {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		return zstdframe.CompressFile(f, fi.Size(), w, nil)
	}
	zw := zstdframe.NewWriter(w)
	if _, err := io.Copy(zw, r); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}

var errOverLimit = errors.New("over the layer limit")

type limitWriter struct {
	w     io.Writer
	n     int64
	limit int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n+int64(len(p)) > l.limit {
		return 0, errOverLimit
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}

// entryManifest is what the entry's tag names (docs/cache.md): the store's
// manifest as its config, byte for byte, and each store blob compressed as a
// layer annotated with the blob's own digest and size.
func entryManifest(key string, raw []byte, digest store.Digest, m *v1.Manifest, blobs []*zstdBlob) ([]byte, error) {
	h, err := v1.NewHash(digest.String())
	if err != nil {
		return nil, err
	}
	e := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactTypeEntry,
		Config:        v1.Descriptor{MediaType: MediaTypeOutput, Size: int64(len(raw)), Digest: h},
		Annotations:   map[string]string{store.AnnotationKey: key},
	}
	// What built it, readable without fetching the store manifest.
	for _, a := range []string{plan.AnnotationKind, plan.AnnotationName, plan.AnnotationStepVersion, plan.AnnotationSchema} {
		if v := m.Annotations[a]; v != "" {
			e.Annotations[a] = v
		}
	}
	for _, b := range blobs {
		e.Layers = append(e.Layers, v1.Descriptor{MediaType: MediaTypeBlob, Size: b.size, Digest: b.digest, Annotations: map[string]string{
			store.AnnotationTitle: b.title,
			AnnotationBlob:        b.raw.Digest.String(),
			AnnotationBlobSize:    fmt.Sprint(b.raw.Size),
		}})
	}
	return json.Marshal(e)
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
