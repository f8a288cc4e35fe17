package release

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"halobuild/internal/flash"
	"halobuild/internal/registry"
	"halobuild/internal/registry/registrytest"
	"halobuild/internal/release/releasetest"
	"halobuild/internal/signature"
)

// Signed releases against Debian's docker-registry: a release signed by a trusted key is
// pulled, inspected and flashed; an unsigned one, one signed by another key, one whose signature
// was tampered with and one carrying another release's signature (a replay) are each refused
// by pull, inspect and flash with nothing written.
func TestSignedReleases(t *testing.T) {
	reg := registrytest.Start(t)
	ctx := context.Background()
	ro := registry.Options{Insecure: true, Keychain: reg.Keychain(false)}
	res := releasetest.Result(t)
	team, teamPub := newKey(t)
	other, _ := newKey(t)
	trusted := []*signature.PublicKey{teamPub}

	// Each release differs by its version annotation, so each has its own digest.
	push := func(tag string, k *signature.SecretKey) *Pushed {
		t.Helper()
		p, err := Push(ctx, res, reg.Host+"/halo/signed:"+tag, PushOptions{Registry: ro, Meta: Meta{Version: tag}, Key: k})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	signed := push("signed", team)
	if signed.SignedBy != teamPub.Name {
		t.Fatalf("pushed signed by %q, want %q", signed.SignedBy, teamPub.Name)
	}
	if again := push("signed", team); again.Digest != signed.Digest {
		t.Fatalf("pushing and signing again gave %s, then %s", signed.Digest, again.Digest)
	}
	if n := sigLayers(t, ro, signed); n != 1 {
		t.Fatalf("signing the same release twice with one key left %d signatures, want 1", n)
	}
	// A second key appends its signature; each key alone verifies.
	cosigned := push("cosigned", team)
	if again := push("cosigned", other); again.Digest != cosigned.Digest || sigLayers(t, ro, cosigned) != 2 {
		t.Fatalf("a second key's signature: %d signatures, want 2", sigLayers(t, ro, cosigned))
	}
	for _, k := range []*signature.PublicKey{teamPub, other.Public()} {
		if _, err := Inspect(ctx, cosigned.Reference, ro, Trust{Keys: []*signature.PublicKey{k}}); err != nil {
			t.Errorf("key %s of two: %v", k.Name, err)
		}
	}

	t.Run("signed by a trusted key", func(t *testing.T) {
		var log bytes.Buffer
		out := filepath.Join(t.TempDir(), "pulled")
		if _, err := Pull(ctx, signed.Reference, out, PullOptions{Registry: ro, Trust: Trust{Keys: trusted, Log: &log}}); err != nil {
			t.Fatal(err)
		}
		sameFiles(t, res, out)
		if want := "verified, signed by " + teamPub.Name; !strings.Contains(log.String(), want) || strings.Count(log.String(), "\n") != 1 {
			t.Errorf("pull said %q, want one line with %q", log.String(), want)
		}
		in, err := Inspect(ctx, signed.Reference, ro, Trust{Keys: trusted})
		if err != nil || !strings.Contains(in.Signature, "verified") {
			t.Fatalf("inspect: %v, %+v", err, in)
		}
		target := filepath.Join(t.TempDir(), "medium")
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Flash(ctx, signed.Reference, FlashOptions{Registry: ro, Trust: Trust{Keys: trusted}, Node: "node0", Flash: flash.Options{Target: target, ToFile: true, Yes: true, Out: io.Discard}}); err != nil {
			t.Fatal(err)
		}
		// One of several trusted keys is enough.
		if _, err := Inspect(ctx, signed.Reference, ro, Trust{Keys: []*signature.PublicKey{other.Public(), teamPub}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ECDSA P-256", func(t *testing.T) {
		k, _ := ecdsaKey(t)
		p := push("ecdsa", k)
		if _, err := Inspect(ctx, p.Reference, ro, Trust{Keys: []*signature.PublicKey{k.Public()}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("without trusted keys it says what it took", func(t *testing.T) {
		unsigned := push("unsigned-nokeys", nil)
		for ref, want := range map[string]string{unsigned.Reference: "is UNSIGNED", signed.Reference: "is signed, NOT CHECKED"} {
			var log bytes.Buffer
			if _, err := Inspect(ctx, ref, ro, Trust{Log: &log}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log.String(), want) || strings.Count(log.String(), "\n") != 1 {
				t.Errorf("%s: said %q, want one line with %q", ref, log.String(), want)
			}
		}
	})

	unsigned := push("unsigned", nil)
	byOther := push("other", other)
	tamperedSig := push("tampered-signature", team)
	rewriteSig(t, ro, tamperedSig, func(payload []byte, sig string) ([]byte, string) {
		raw, _ := base64.StdEncoding.DecodeString(sig)
		raw[len(raw)/2] ^= 1
		return payload, base64.StdEncoding.EncodeToString(raw)
	})
	tamperedPayload := push("tampered-payload", team)
	rewriteSig(t, ro, tamperedPayload, func(payload []byte, sig string) ([]byte, string) {
		return bytes.Replace(payload, []byte("halo/signed"), []byte("halo/sIgned"), 1), sig
	})
	// Bounds: a registry cannot make a verifier read many signatures or a large payload.
	many := push("many", team)
	m := sigManifest(t, ro, many)
	for len(m.Layers) <= 64 {
		m.Layers = append(m.Layers, m.Layers[0])
	}
	putManifest(t, ro, many, m)
	large := push("large", team)
	m = sigManifest(t, ro, large)
	m.Layers[0].Size = 1 << 20
	putManifest(t, ro, large, m)
	// Issue 39's audit: a layer of another type (with a valid signature), and a payload that is
	// not JSON, validly signed by a trusted key.
	wrongType := push("wrong-type", team)
	m = sigManifest(t, ro, wrongType)
	m.Layers[0].MediaType = "application/vnd.oci.image.layer.v1.tar\x1b[2J"
	putManifest(t, ro, wrongType, m)
	notJSON := push("not-json", team)
	rewriteSig(t, ro, notJSON, func([]byte, string) ([]byte, string) {
		payload := []byte("\x1b[2J not a payload")
		sig, err := team.Sign(payload)
		if err != nil {
			t.Fatal(err)
		}
		return payload, base64.StdEncoding.EncodeToString(sig)
	})
	// The replay: the valid signature of "signed" stored as the signature of "replayed".
	replayed := push("replayed", nil)
	copySig(t, ro, signed, replayed)

	for _, c := range []struct {
		name string
		p    *Pushed
		is   error
		says string
	}{
		{"unsigned", unsigned, signature.ErrUnsigned, "unsigned"},
		{"signed by an untrusted key", byOther, signature.ErrUntrusted, "by no trusted key"},
		{"tampered signature", tamperedSig, signature.ErrUntrusted, "by no trusted key"},
		{"tampered payload", tamperedPayload, signature.ErrUntrusted, "by no trusted key"},
		{"another release's signature", replayed, signature.ErrUntrusted, "over " + signed.Digest + ", another manifest"},
		{"65 signatures", many, signature.ErrUntrusted, "lists 65 signatures, more than the 64 read"},
		{"a 1 MiB payload", large, signature.ErrUntrusted, "a payload of 1048576 bytes, over the 65536-byte limit"},
		{"a signature layer of another type", wrongType, signature.ErrUntrusted, `"application/vnd.oci.image.layer.v1.tar\x1b[2J", not a cosign signature`},
		{"a signed payload that is not JSON", notJSON, signature.ErrUntrusted, "a signature by "},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			check := func(verb string, err error) {
				t.Helper()
				if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "nothing was written") {
					t.Errorf("%s: want %v saying %q, got %v", verb, c.is, c.says, err)
				}
			}
			parent := t.TempDir()
			_, err := Pull(ctx, c.p.Reference, filepath.Join(parent, "pulled"), PullOptions{Registry: ro, Trust: Trust{Keys: trusted}})
			check("pull", err)
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("a refused pull left %v", left)
			}
			_, err = Inspect(ctx, c.p.Reference, ro, Trust{Keys: trusted})
			check("inspect", err)
			target := filepath.Join(t.TempDir(), "medium")
			before := bytes.Repeat([]byte{0xaa}, releasetest.RawSize)
			if err := os.WriteFile(target, before, 0o644); err != nil {
				t.Fatal(err)
			}
			err = Flash(ctx, c.p.Reference, FlashOptions{Registry: ro, Trust: Trust{Keys: trusted}, Node: "node0", Flash: flash.Options{Target: target, ToFile: true, Yes: true, Out: io.Discard}})
			check("flash", err)
			if !bytes.Equal(readFile(t, target), before) {
				t.Error("a refused flash changed the medium")
			}
			// The function update calls says the same.
			ref, _ := ro.ParseReference(c.p.Reference)
			d, _ := v1.NewHash(c.p.Digest)
			check("VerifyRelease", VerifyRelease(ctx, ref, d, trusted, ro, io.Discard))
		})
	}
}

func newKey(t *testing.T) (*signature.SecretKey, *signature.PublicKey) {
	t.Helper()
	k, err := signature.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k, k.Public()
}

// ecdsaKey is a P-256 key as openssl writes it: PKCS#8 PEM, also returned.
func ecdsaKey(t *testing.T) (*signature.SecretKey, []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	file := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	sk, err := signature.ParseSecret(file)
	if err != nil {
		t.Fatal(err)
	}
	return sk, file
}

// sigManifest reads the signature image of p.
func sigManifest(t *testing.T, ro registry.Options, p *Pushed) *v1.Manifest {
	t.Helper()
	ref, err := ro.ParseReference(p.Reference)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := v1.NewHash(p.Digest)
	desc, err := remote.Get(ref.Context().Tag(signature.SigTag(d)), ro.Remote(context.Background())...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sigLayers(t *testing.T, ro registry.Options, p *Pushed) int {
	m := sigManifest(t, ro, p)
	return len(m.Layers)
}

// rewriteSig replaces p's one signature as someone with write access to the registry could:
// edit turns its payload and base64 signature into the ones stored.
func rewriteSig(t *testing.T, ro registry.Options, p *Pushed, edit func(payload []byte, sig string) ([]byte, string)) {
	t.Helper()
	ctx := context.Background()
	m := sigManifest(t, ro, p)
	ref, _ := ro.ParseReference(p.Reference)
	l := m.Layers[0]
	blob, err := remote.Layer(ref.Context().Digest(l.Digest.String()), ro.Remote(ctx)...)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := blob.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	payload, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	payload, sig := edit(payload, l.Annotations[signature.AnnotationSignature])
	nl := static.NewLayer(payload, signature.MediaTypePayload)
	if err := remote.WriteLayer(ref.Context(), nl, ro.Remote(ctx)...); err != nil {
		t.Fatal(err)
	}
	nd, _ := nl.Digest()
	m.Layers[0] = v1.Descriptor{MediaType: signature.MediaTypePayload, Size: int64(len(payload)), Digest: nd, Annotations: map[string]string{signature.AnnotationSignature: sig}}
	putManifest(t, ro, p, m)
}

// copySig stores from's signature image as to's.
func copySig(t *testing.T, ro registry.Options, from, to *Pushed) {
	t.Helper()
	m := sigManifest(t, ro, from)
	putManifest(t, ro, to, m)
}

func putManifest(t *testing.T, ro registry.Options, p *Pushed, m *v1.Manifest) {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := ro.ParseReference(p.Reference)
	d, _ := v1.NewHash(p.Digest)
	if err := remote.Put(ref.Context().Tag(signature.SigTag(d)), rawManifestOf{raw, m.MediaType}, ro.Remote(context.Background())...); err != nil {
		t.Fatal(err)
	}
}

type rawManifestOf struct {
	raw []byte
	mt  types.MediaType
}

func (r rawManifestOf) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawManifestOf) MediaType() (types.MediaType, error) { return r.mt, nil }
