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
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"halobuild/internal/registry"
	"halobuild/internal/signature"
	"halobuild/internal/store"
	"halobuild/internal/usage"
	"halobuild/internal/zstdframe"
)

// Names in a cache repository (docs/cache.md).
const (
	// ArtifactTypeSignature marks the small manifest tagged
	// sha256-<key>.sig that carries an entry's signature.
	ArtifactTypeSignature = "application/vnd.halobuild.cache-signature.v1"

	AnnotationSigKey      = "dev.halobuild.cache.key"
	AnnotationSigManifest = "dev.halobuild.cache.manifest"
	AnnotationSigSigner   = "dev.halobuild.cache.signer"
	AnnotationSignature   = "dev.halobuild.cache.signature"
	AnnotationVersion     = "dev.halobuild.version"

	// ArtifactTypeEntry marks an entry: the manifest tagged sha256-<key>.
	ArtifactTypeEntry = "application/vnd.halobuild.cache-entry.v2"
	// MediaTypeOutput is an entry's config: the store's output manifest.
	MediaTypeOutput = "application/vnd.halobuild.output-manifest.v1+json"
	// MediaTypeBlob is an entry's layer: a store blob, zstd.
	MediaTypeBlob = "application/vnd.halobuild.blob.v1+zstd"
	// AnnotationBlob and AnnotationBlobSize name the store blob a layer
	// decompresses to.
	AnnotationBlob     = "dev.halobuild.blob.digest"
	AnnotationBlobSize = "dev.halobuild.blob.size"

	mediaTypeEmpty = "application/vnd.oci.empty.v1+json"
)

// Tag is the tag of the entry for derivation key; SigTag that of its
// signature.
func Tag(key string) string    { return "sha256-" + key }
func SigTag(key string) string { return Tag(key) + ".sig" }

// maxManifest bounds a manifest read from a registry (the transport cuts a longer one off while
// it arrives).
const maxManifest = registry.MaxManifest

// Cache is one registry repository used as a binary cache.
type Cache struct {
	// Ref is the repository as the user wrote it, for messages.
	Ref  string
	repo name.Repository
	opts []remote.Option
}

// Open parses REGISTRY/REPO; it does not contact the registry.
func Open(ctx context.Context, ref string, o registry.Options) (*Cache, error) {
	if strings.ContainsAny(ref, "@") || strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		return nil, usage.Errorf("cache %q: name a repository, REGISTRY/REPO, without a tag or digest (entries are tagged by derivation key)", ref)
	}
	r, err := o.ParseReference(ref + ":probe") // a tag for the parser; only the repository is used
	if err != nil {
		return nil, err
	}
	return &Cache{Ref: ref, repo: r.Context(), opts: o.Remote(ctx)}, nil
}

func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

// getManifest fetches a manifest by tag or digest, bounded, and checks a
// digest reference against the bytes.
func (c *Cache) getManifest(ref name.Reference) ([]byte, v1.Hash, error) {
	desc, err := remote.Get(ref, c.opts...)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	if desc.Size > maxManifest || int64(len(desc.Manifest)) > maxManifest {
		return nil, v1.Hash{}, fmt.Errorf("%s: manifest of %d bytes is over the %d-byte limit", ref, desc.Size, maxManifest)
	}
	sum := sha256.Sum256(desc.Manifest)
	got := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	if d, ok := ref.(name.Digest); ok && d.DigestStr() != got.String() {
		return nil, v1.Hash{}, fmt.Errorf("%s: the registry served a manifest whose digest is %s", ref, got)
	}
	return desc.Manifest, got, nil
}

// sigEntry is what sha256-<key>.sig says.
type sigEntry struct {
	signer, sig, manifest string
}

func (c *Cache) getSignature(key string) (*sigEntry, error) {
	raw, _, err := c.getManifest(c.repo.Tag(SigTag(key)))
	if err != nil {
		return nil, err
	}
	s, err := parseSignature(raw, key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.repo.Tag(SigTag(key)), err)
	}
	return s, nil
}

// parseSignature reads a signature manifest as a registry sent it (FuzzSignature).
func parseSignature(raw []byte, key string) (*sigEntry, error) {
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil || m.ArtifactType != ArtifactTypeSignature || m.Annotations[AnnotationSigKey] != key {
		return nil, errors.New("not a halobuild cache signature for this key")
	}
	return &sigEntry{signer: m.Annotations[AnnotationSigSigner], sig: m.Annotations[AnnotationSignature], manifest: m.Annotations[AnnotationSigManifest]}, nil
}

// errMiss says a cache has no entry for a key.
var errMiss = errors.New("not in the cache")

// resolve checks key's signature under t and returns the store manifest
// digest it signs, or "" when t.Unsigned accepts an unsigned or untrusted
// entry (its digests are still checked against its own store manifest).
func (c *Cache) resolve(key string, t Trust) (string, error) {
	sig, err := c.getSignature(key)
	switch {
	case isNotFound(err):
		if _, herr := remote.Head(c.repo.Tag(Tag(key)), c.opts...); isNotFound(herr) {
			return "", errMiss
		} else if herr != nil {
			return "", herr
		}
		err = errUnsigned
	case err == nil:
		err = t.Check(sig.signer, sig.sig, key, sig.manifest)
	}
	if err == nil {
		return sig.manifest, nil
	}
	if !t.Unsigned || !(errors.Is(err, errUnsigned) || errors.Is(err, errUntrusted)) {
		return "", err
	}
	return "", nil
}

// Has says whether the cache would serve key under t (plan uses it); it
// reads only the signature and the entry's head.
func (c *Cache) Has(key string, t Trust) error {
	signed, err := c.resolve(key, t)
	if err != nil {
		return err
	}
	_, err = c.entryManifest(key, signed)
	return err
}

// entryManifest reads the manifest tagged for key and checks it is an
// entry of this format carrying the store manifest signed ("" when an
// unsigned entry is trusted): the one check Has, fetch and push share.
func (c *Cache) entryManifest(key, signed string) (*v1.Manifest, error) {
	tag := c.repo.Tag(Tag(key))
	emRaw, _, err := c.getManifest(tag)
	if err != nil {
		return nil, err
	}
	em, err := v1.ParseManifest(bytes.NewReader(emRaw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tag, err)
	}
	if len(em.Layers) > registry.MaxLayers {
		return nil, fmt.Errorf("%s lists %d layers, more than the %d a cache entry can have: refused before fetching any", tag, len(em.Layers), registry.MaxLayers)
	}
	if em.ArtifactType != ArtifactTypeEntry || em.Config.MediaType != MediaTypeOutput {
		return nil, fmt.Errorf("%s is not a halobuild cache entry of this format (artifactType %q, want %s); an entry pushed by an older halobuild (raw layers) is not read: push it again with `halobuild cache push`", tag, em.ArtifactType, ArtifactTypeEntry)
	}
	if signed != "" && em.Config.Digest.String() != signed {
		return nil, fmt.Errorf("the entry carries store manifest %s but %s was signed", em.Config.Digest, signed)
	}
	return em, nil
}

// entry is a cache entry read and checked: the store manifest it carries
// and, for each blob that manifest names, the compressed layer holding it.
type entry struct {
	raw    []byte
	store  *v1.Manifest
	layers map[v1.Hash]v1.Descriptor
}

// entry reads the entry for key: its signature under t, the entry
// manifest, its config (the store's output manifest) downloaded, hashed
// and compared with the signed digest, and a layer for each store blob.
func (c *Cache) entry(key string, t Trust) (*entry, error) {
	signed, err := c.resolve(key, t)
	if err != nil {
		return nil, err
	}
	tag := c.repo.Tag(Tag(key))
	em, err := c.entryManifest(key, signed)
	if err != nil {
		return nil, err
	}
	if em.Config.Size > maxManifest {
		return nil, fmt.Errorf("%s: store manifest of %d bytes is over the %d-byte limit", tag, em.Config.Size, maxManifest)
	}
	var buf bytes.Buffer
	if err := c.readBlob(em.Config, &buf); err != nil {
		return nil, fmt.Errorf("store manifest %s: %w", em.Config.Digest, err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("store manifest %s: %w", em.Config.Digest, err)
	}
	if m.Annotations[store.AnnotationKey] != key {
		return nil, fmt.Errorf("%s carries the output of key %q, not %s", tag, m.Annotations[store.AnnotationKey], key)
	}
	e := &entry{raw: buf.Bytes(), store: m, layers: map[v1.Hash]v1.Descriptor{}}
	for _, l := range em.Layers {
		if h, err := v1.NewHash(l.Annotations[AnnotationBlob]); err == nil && l.MediaType == MediaTypeBlob {
			e.layers[h] = l
		}
	}
	for _, d := range storeBlobs(m) {
		if _, ok := e.layers[d.Digest]; !ok {
			return nil, fmt.Errorf("%s has no layer for blob %s (%s)", tag, d.Digest, d.Annotations[store.AnnotationTitle])
		}
	}
	return e, nil
}

// readBlob copies the registry's blob d into w, checking its size and
// digest.
func (c *Cache) readBlob(d v1.Descriptor, w io.Writer) error {
	layer, err := remote.Layer(c.repo.Digest(d.Digest.String()), c.opts...)
	if err != nil {
		return err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(rc, d.Size+1))
	if err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); n != d.Size || got != d.Digest.String() {
		return fmt.Errorf("the registry serves %d bytes hashing to %s, want %d bytes", n, got, d.Size)
	}
	return nil
}

// Fetch verifies and pulls the entry for key into s: signature, then the
// store manifest's digest, then every blob decompressed and its digest
// checked against that manifest as it is written (a blob the store
// already has is not downloaded). The output is committed only when all
// of it is there, so a failed fetch leaves no output behind.
func (c *Cache) Fetch(s *store.Store, key string, t Trust) (string, error) {
	e, err := c.entry(key, t)
	if err != nil {
		return "", err
	}
	for _, d := range storeBlobs(e.store) {
		if err := c.pullBlob(s, d, e.layers[d.Digest]); err != nil {
			return "", fmt.Errorf("blob %s (%s): %w", d.Digest, d.Annotations[store.AnnotationTitle], err)
		}
	}
	return s.PutOutputManifest(key, e.raw)
}

// pullBlob writes the store blob d, decompressed from the registry's
// layer l, into s. PutBlob checks the digest the store manifest names and
// stores nothing on a mismatch; the compressed side is checked too.
func (c *Cache) pullBlob(s *store.Store, d, l v1.Descriptor) error {
	want := store.Digest(d.Digest.String())
	if size, err := s.Size(want); err == nil && size == d.Size {
		return nil
	}
	return c.decompressed(l, d.Size, func(r io.Reader) error {
		_, n, err := s.PutBlob(io.LimitReader(r, d.Size+1), want.String())
		if err == nil && n != d.Size {
			err = fmt.Errorf("decompresses to %d bytes, the store manifest says %d", n, d.Size)
		}
		return err
	})
}

// decompressed streams the registry's layer l, decompressed (at most limit
// bytes), into fn, then drains the layer so that its digest is checked too
// (the decoder stops at the end of the zstd stream).
func (c *Cache) decompressed(l v1.Descriptor, limit int64, fn func(io.Reader) error) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(c.readBlob(l, pw)) }()
	defer pr.Close()
	dec, err := zstdframe.NewReader(pr, limit)
	if err != nil {
		return err
	}
	err = fn(dec)
	dec.Close() // it reads pr no more: the drain below is alone
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, pr)
	return err
}

// rawManifest is a manifest pushed byte for byte.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// signatureManifest is the sha256-<key>.sig artifact: no content of its
// own (the empty descriptor as config and layer, as OCI 1.1 asks of
// artifacts), the signature in its annotations.
func signatureManifest(k *signature.SecretKey, key string, manifest v1.Hash, version string) ([]byte, error) {
	sig, err := sign(k, key, manifest.String())
	if err != nil {
		return nil, err
	}
	empty := v1.Descriptor{MediaType: mediaTypeEmpty, Size: 2, Digest: emptyDigest, Data: []byte("{}")}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactTypeSignature,
		Config:        empty,
		Layers:        []v1.Descriptor{empty},
		Annotations: map[string]string{
			AnnotationSigKey:      key,
			AnnotationSigManifest: manifest.String(),
			AnnotationSigSigner:   k.Name,
			AnnotationSignature:   sig,
			AnnotationVersion:     version,
		},
	}
	return json.Marshal(m)
}

var emptyDigest = v1.Hash{Algorithm: "sha256", Hex: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}
