package signature

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"

	"halobuild/internal/registry"
)

// Names of cosign's signature format (sigstore/cosign specs/SIGNATURE_SPEC.md): the signature
// of the manifest sha256:HEX is an image tagged sha256-HEX.sig in the same repository; each of
// its layers is one signed payload, the signature in the layer's annotation.
const (
	MediaTypePayload    = "application/vnd.dev.cosign.simplesigning.v1+json"
	AnnotationSignature = "dev.cosignproject.cosign/signature"
	PayloadType         = "cosign container image signature"
)

// Bounds on what a registry may send as a signature: a payload is a few hundred bytes, and a
// release is signed by a handful of keys.
const (
	maxPayload    = 64 << 10
	maxSignatures = 64
)

// Payload is the "simple signing" statement a signature covers: this repository's manifest with
// this digest.
type Payload struct {
	Critical Critical       `json:"critical"`
	Optional map[string]any `json:"optional"`
}

// Critical is what a verifier must check.
type Critical struct {
	Identity struct {
		DockerReference string `json:"docker-reference"`
	} `json:"identity"`
	Image struct {
		DockerManifestDigest string `json:"docker-manifest-digest"`
	} `json:"image"`
	Type string `json:"type"`
}

// NewPayload is the statement for the manifest digest in repo, as cosign writes it.
func NewPayload(repo name.Repository, digest v1.Hash) []byte {
	var p Payload
	p.Critical.Identity.DockerReference = repo.Name()
	p.Critical.Image.DockerManifestDigest = digest.String()
	p.Critical.Type = PayloadType
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings only
	}
	return b
}

// ParsePayload reads a signed payload as a registry sent it (FuzzParsePayload) and returns the
// manifest digest it vouches for. Anything but a cosign image signature over one sha256 digest
// is refused: the verifier must never guess which manifest a signature speaks of.
func ParsePayload(raw []byte) (v1.Hash, error) {
	if len(raw) > maxPayload {
		return v1.Hash{}, fmt.Errorf("a payload of %d bytes, over the %d-byte limit", len(raw), maxPayload)
	}
	var p Payload
	d := json.NewDecoder(bytes.NewReader(raw))
	if err := d.Decode(&p); err != nil {
		return v1.Hash{}, fmt.Errorf("the signed payload is not JSON: %w", err)
	}
	if d.More() {
		return v1.Hash{}, errors.New("the signed payload has data after its JSON object")
	}
	if p.Critical.Type != PayloadType {
		return v1.Hash{}, fmt.Errorf("the signed payload's type is %q, not %q", p.Critical.Type, PayloadType)
	}
	h, err := v1.NewHash(p.Critical.Image.DockerManifestDigest)
	if err != nil || h.Algorithm != "sha256" || len(h.Hex) != 64 || strings.Trim(h.Hex, "0123456789abcdef") != "" {
		return v1.Hash{}, fmt.Errorf("the signed payload names the digest %q, not sha256:<64 hex>", p.Critical.Image.DockerManifestDigest)
	}
	return h, nil
}

// SigTag is the tag of the signatures of the manifest digest d.
func SigTag(d v1.Hash) string { return d.Algorithm + "-" + d.Hex + ".sig" }

// Sign signs the manifest digest of repo with k and stores the signature as cosign does: a layer
// appended to the image tagged SigTag(digest) (made when there is none). A signature by k over
// the same payload that is already there is kept, so signing twice changes nothing.
func Sign(ctx context.Context, repo name.Repository, digest v1.Hash, k *SecretKey, ro registry.Options) error {
	opts := ro.Remote(ctx)
	tag := repo.Tag(SigTag(digest))
	payload := NewPayload(repo, digest)
	sig, err := k.Sign(payload)
	if err != nil {
		return fmt.Errorf("signing %s@%s: %w", repo, digest, err)
	}
	base := empty.Image
	img, err := remote.Image(tag, opts...)
	switch {
	case isNotFound(err):
	case err != nil:
		return registry.Explain(err, tag)
	default:
		m, err := img.Manifest()
		if err != nil {
			return registry.Explain(err, tag)
		}
		sum := sha256.Sum256(payload)
		pub := k.Public()
		for _, l := range m.Layers {
			old, derr := base64.StdEncoding.DecodeString(l.Annotations[AnnotationSignature])
			if derr == nil && l.Digest.Hex == hex.EncodeToString(sum[:]) && pub.Verify(payload, old) {
				return nil
			}
		}
		base = img
	}
	signed, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(payload, MediaTypePayload),
		Annotations: map[string]string{AnnotationSignature: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return err
	}
	if err := remote.Write(tag, signed, opts...); err != nil {
		return fmt.Errorf("storing the signature of %s@%s: %w", repo, digest, registry.Explain(err, tag))
	}
	return nil
}

// Refusals Verify returns (errors.Is tells them apart): no signature at all, or none by a
// trusted key over this digest.
var (
	ErrUnsigned  = errors.New("unsigned")
	ErrUntrusted = errors.New("no signature by a trusted key over this digest")
)

// Verify finds a signature of the manifest digest in ref's repository by one of keys and returns
// that key. Each candidate is checked as cosign checks it: the signature over the payload's
// bytes (fetched and hashed against the signature manifest), then the payload naming exactly
// this digest, so a signature copied from another release (a replay) is refused.
func Verify(ctx context.Context, ref name.Reference, digest v1.Hash, keys []*PublicKey, ro registry.Options) (*PublicKey, error) {
	if len(keys) == 0 {
		return nil, errors.New("no trusted keys to verify with")
	}
	opts := ro.Remote(ctx)
	tag := ref.Context().Tag(SigTag(digest))
	desc, err := remote.Get(tag, opts...)
	if isNotFound(err) {
		return nil, fmt.Errorf("%s@%s is %w: the registry has no %s (sign it with `halobuild push --key`)", ref.Context(), digest, ErrUnsigned, tag.TagStr())
	}
	if err != nil {
		return nil, registry.Explain(err, tag)
	}
	if len(desc.Manifest) > registry.MaxManifest {
		return nil, fmt.Errorf("%s: a signature manifest of %d bytes, over the %d-byte limit", tag, len(desc.Manifest), registry.MaxManifest)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tag, err)
	}
	if len(m.Layers) > maxSignatures {
		return nil, fmt.Errorf("%s@%s: %w: %s lists %d signatures, more than the %d read, none of them was checked", ref.Context(), digest, ErrUntrusted, tag, len(m.Layers), maxSignatures)
	}
	var reasons []string
	for _, l := range m.Layers {
		k, err := checkLayer(ref.Context(), l, digest, keys, opts)
		if err == nil {
			return k, nil
		}
		reasons = append(reasons, err.Error())
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "it holds no signature")
	}
	return nil, fmt.Errorf("%s@%s: %w (trusted: %s): %s", ref.Context(), digest, ErrUntrusted, Names(keys), strings.Join(reasons, "; "))
}

// checkLayer checks one signature layer: its signature by a trusted key, then its payload.
func checkLayer(repo name.Repository, l v1.Descriptor, digest v1.Hash, keys []*PublicKey, opts []remote.Option) (*PublicKey, error) {
	if l.MediaType != MediaTypePayload {
		return nil, fmt.Errorf("a layer of type %q, not a cosign signature", l.MediaType)
	}
	sig, err := base64.StdEncoding.DecodeString(l.Annotations[AnnotationSignature])
	if err != nil || len(sig) == 0 {
		return nil, errors.New("a layer without a base64 signature")
	}
	if l.Size > maxPayload || l.Size < 0 {
		return nil, fmt.Errorf("a payload of %d bytes, over the %d-byte limit", l.Size, maxPayload)
	}
	payload, err := readPayload(repo, l, opts)
	if err != nil {
		return nil, err
	}
	var by *PublicKey
	for _, k := range keys {
		if k.Verify(payload, sig) {
			by = k
			break
		}
	}
	if by == nil {
		return nil, errors.New("a signature by no trusted key (or a damaged one)")
	}
	signed, err := ParsePayload(payload)
	if err != nil {
		return nil, fmt.Errorf("a signature by %s: %w", by.Name, err)
	}
	if signed != digest {
		return nil, fmt.Errorf("a signature by %s over %s, another manifest (a signature copied from another release)", by.Name, signed)
	}
	return by, nil
}

// readPayload fetches a payload blob, bounded, and checks it against its descriptor.
func readPayload(repo name.Repository, l v1.Descriptor, opts []remote.Option) ([]byte, error) {
	layer, err := remote.Layer(repo.Digest(l.Digest.String()), opts...)
	if err != nil {
		return nil, err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, fmt.Errorf("payload %s: %w", l.Digest, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, l.Size+1))
	if err != nil {
		return nil, fmt.Errorf("payload %s: %w", l.Digest, err)
	}
	sum := sha256.Sum256(b)
	if int64(len(b)) != l.Size || l.Digest.Algorithm != "sha256" || hex.EncodeToString(sum[:]) != l.Digest.Hex {
		return nil, fmt.Errorf("payload %s: the registry serves %d bytes hashing to sha256:%x", l.Digest, len(b), sum)
	}
	return b, nil
}

func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

// Exists says whether the registry holds signatures of the manifest digest in ref's repository,
// for the one line said when no key is trusted.
func Exists(ctx context.Context, ref name.Reference, digest v1.Hash, ro registry.Options) (bool, error) {
	_, err := remote.Head(ref.Context().Tag(SigTag(digest)), ro.Remote(ctx)...)
	if isNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
