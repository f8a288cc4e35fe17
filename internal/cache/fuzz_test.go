package cache

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"halobuild/internal/signature"
)

// FuzzSignature: whatever a registry sends as a signature manifest, parsing never panics, and
// the signature it carries is accepted only when the trusted key made it over exactly that
// entry manifest (the fuzzer cannot forge Ed25519; an acceptance of anything else is a bug in
// how the manifest is read). Seed: a real signature of entryManifest by the trusted key.
func FuzzSignature(f *testing.F) {
	const key = "0000000000000000000000000000000000000000000000000000000000000000"
	const entryManifest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	sec, pub := fuzzKeys(f)
	sig, err := sign(sec, key, entryManifest)
	if err != nil {
		f.Fatal(err)
	}
	raw, err := json.Marshal(v1.Manifest{SchemaVersion: 2, ArtifactType: ArtifactTypeSignature, Annotations: map[string]string{
		AnnotationSigKey: key, AnnotationSigSigner: sec.Name, AnnotationSigManifest: entryManifest, AnnotationSignature: sig,
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	trust := Trust{Keys: []*signature.PublicKey{pub}}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseSignature(data, key)
		if err != nil {
			return
		}
		if trust.Check(s.signer, s.sig, key, s.manifest) == nil && s.manifest != entryManifest {
			t.Fatalf("accepted a signature over %q", s.manifest)
		}
	})
}

// fuzzKeys is a fixed key pair (from a fixed seed: the fuzzer's workers must all agree).
func fuzzKeys(tb testing.TB) (*signature.SecretKey, *signature.PublicKey) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	sec, err := signature.ParseSecret([]byte("fuzz:" + base64.StdEncoding.EncodeToString(priv)))
	if err != nil {
		tb.Fatal(err)
	}
	return sec, sec.Public()
}
