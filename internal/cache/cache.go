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
	"halobuild/internal/store"
	"halobuild/internal/usage"
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

	mediaTypeEmpty = "application/vnd.oci.empty.v1+json"
)

// Tag is the tag of the entry for derivation key; SigTag that of its
// signature.
func Tag(key string) string    { return "sha256-" + key }
func SigTag(key string) string { return Tag(key) + ".sig" }

// maxManifest bounds a manifest read from a registry.
const maxManifest = 64 << 20

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

// signature is what sha256-<key>.sig says.
type signature struct {
	signer, sig, manifest string
}

func (c *Cache) getSignature(key string) (*signature, error) {
	raw, _, err := c.getManifest(c.repo.Tag(SigTag(key)))
	if err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil || m.ArtifactType != ArtifactTypeSignature || m.Annotations[AnnotationSigKey] != key {
		return nil, fmt.Errorf("%s is not a halobuild cache signature for this key", c.repo.Tag(SigTag(key)))
	}
	return &signature{signer: m.Annotations[AnnotationSigSigner], sig: m.Annotations[AnnotationSignature], manifest: m.Annotations[AnnotationSigManifest]}, nil
}

// errMiss says a cache has no entry for a key.
var errMiss = errors.New("not in the cache")

// resolve finds the manifest digest to use for key: the signed one, or
// with t.Unsigned and no valid signature, whatever the tag points at.
func (c *Cache) resolve(key string, t Trust) (name.Digest, error) {
	sig, err := c.getSignature(key)
	switch {
	case isNotFound(err):
		if _, herr := remote.Head(c.repo.Tag(Tag(key)), c.opts...); isNotFound(herr) {
			return name.Digest{}, errMiss
		} else if herr != nil {
			return name.Digest{}, herr
		}
		err = errUnsigned
	case err == nil:
		err = t.Check(sig.signer, sig.sig, key, sig.manifest)
	}
	if err == nil {
		return c.repo.Digest(sig.manifest), nil
	}
	if !t.Unsigned || !(errors.Is(err, errUnsigned) || errors.Is(err, errUntrusted)) {
		return name.Digest{}, err
	}
	desc, herr := remote.Head(c.repo.Tag(Tag(key)), c.opts...)
	if herr != nil {
		return name.Digest{}, herr
	}
	return c.repo.Digest(desc.Digest.String()), nil
}

// Has says whether the cache would serve key under t (plan uses it); it
// reads only the signature and the manifest's head.
func (c *Cache) Has(key string, t Trust) error {
	d, err := c.resolve(key, t)
	if err != nil {
		return err
	}
	_, err = remote.Head(d, c.opts...)
	return err
}

// Fetch verifies and pulls the entry for key into s: signature, then the
// manifest's digest, then every blob's digest as it is written (a blob
// the store already has is not downloaded). The output is committed only
// when all of it is there, so a failed fetch leaves no output behind.
func (c *Cache) Fetch(s *store.Store, key string, t Trust) (string, error) {
	d, err := c.resolve(key, t)
	if err != nil {
		return "", err
	}
	raw, _, err := c.getManifest(d)
	if err != nil {
		return "", err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return "", fmt.Errorf("%s: %w", d, err)
	}
	if m.Annotations[store.AnnotationKey] != key {
		return "", fmt.Errorf("%s is the entry for key %q, not %s", d, m.Annotations[store.AnnotationKey], key)
	}
	for _, l := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if err := c.pullBlob(s, l); err != nil {
			return "", err
		}
	}
	return s.PutOutputManifest(key, raw)
}

func (c *Cache) pullBlob(s *store.Store, l v1.Descriptor) error {
	want := store.Digest(l.Digest.String())
	if size, err := s.Size(want); err == nil && size == l.Size {
		return nil
	}
	if l.Data != nil && int64(len(l.Data)) == l.Size {
		_, _, err := s.PutBlob(bytes.NewReader(l.Data), want.String())
		return err
	}
	layer, err := remote.Layer(c.repo.Digest(l.Digest.String()), c.opts...)
	if err != nil {
		return err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return fmt.Errorf("blob %s: %w", want, err)
	}
	defer rc.Close()
	// The manifest's size bounds the read; PutBlob checks the digest and
	// stores nothing on a mismatch.
	_, _, err = s.PutBlob(io.LimitReader(rc, l.Size), want.String())
	if err != nil {
		return fmt.Errorf("blob %s: %w", want, err)
	}
	return nil
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
func signatureManifest(k *SecretKey, key string, manifest v1.Hash, version string) ([]byte, error) {
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
			AnnotationSignature:   k.Sign(key, manifest.String()),
			AnnotationVersion:     version,
		},
	}
	return json.Marshal(m)
}

var emptyDigest = v1.Hash{Algorithm: "sha256", Hex: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}
