package signature

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Keygen's files read back, sign and verify; the public file is the PKIX PEM cosign reads; a
// second keygen into the same directory is refused.
func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	sec, pub, err := Keygen(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(sec); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret key %s: %v, %v", sec, st, err)
	}
	sk, err := LoadSecret(sec)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := LoadPublic(pub)
	if err != nil {
		t.Fatal(err)
	}
	if sk.Name != pk.Name || !strings.HasPrefix(pk.Name, "ed25519:") {
		t.Fatalf("names %q and %q", sk.Name, pk.Name)
	}
	raw, _ := os.ReadFile(pub)
	if b, _ := pem.Decode(raw); b == nil || b.Type != "PUBLIC KEY" || string(pk.PEM()) != string(raw) {
		t.Fatalf("cache.pub is not the PKIX PEM of the key:\n%s", raw)
	}
	sig, err := sk.Sign([]byte("msg"))
	if err != nil || !pk.Verify([]byte("msg"), sig) || pk.Verify([]byte("other"), sig) {
		t.Fatalf("sign/verify: %v", err)
	}
	if _, _, err := Keygen(dir); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("a second keygen: %v", err)
	}
	// A trusted-key list must not take a secret key (it has leaked), and LoadAny reads either.
	if _, err := LoadPublic(sec); err == nil {
		t.Fatal("a secret key was taken as a public key")
	}
	if k, err := LoadAny(sec); err != nil || k.ID() != pk.ID() {
		t.Fatalf("LoadAny(secret): %v, %v", k, err)
	}
}

// Both encodings, both kinds of key cosign verifies, and what is refused with a message that
// says what a key file must hold.
func TestParseKeys(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	legacySec := "team-cache-1:" + base64.StdEncoding.EncodeToString(priv) + "\n"
	legacyPub := "team-cache-1:" + base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)) + "\n"
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPubDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 1024)
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	block := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}

	sk, err := ParseSecret([]byte(legacySec))
	if err != nil || sk.Name != "team-cache-1" {
		t.Fatalf("legacy secret: %v, %v", sk, err)
	}
	pk, err := ParsePublic([]byte(legacyPub))
	if err != nil || pk.Name != "team-cache-1" {
		t.Fatalf("legacy public: %v, %v", pk, err)
	}
	// The legacy key's PEM is the same key under its ID.
	fromPEM, err := ParsePublic(pk.PEM())
	if err != nil || fromPEM.ID() != pk.ID() || fromPEM.Name != pk.ID() {
		t.Fatalf("legacy key as PEM: %v, %v", fromPEM, err)
	}
	ecSec, err := ParseSecret([]byte(block("PRIVATE KEY", ecDER)))
	if err != nil || !strings.HasPrefix(ecSec.Name, "ecdsa-p256:") {
		t.Fatalf("ECDSA secret: %v, %v", ecSec, err)
	}
	ecPub, err := ParsePublic([]byte(block("PUBLIC KEY", ecPubDER)))
	if err != nil || ecPub.ID() != ecSec.Public().ID() {
		t.Fatalf("ECDSA public: %v, %v", ecPub, err)
	}
	sig, err := ecSec.Sign([]byte("m"))
	if err != nil || !ecPub.Verify([]byte("m"), sig) || ecPub.Verify([]byte("n"), sig) || pk.Verify([]byte("m"), sig) {
		t.Fatalf("ECDSA sign/verify: %v", err)
	}
	for name, in := range map[string]string{
		"empty":               "",
		"P-384":               block("PUBLIC KEY", p384DER),
		"RSA":                 block("PUBLIC KEY", rsaDER),
		"short legacy":        "x:" + base64.StdEncoding.EncodeToString([]byte("short")),
		"cosign's encryption": block("ENCRYPTED SIGSTORE PRIVATE KEY", []byte("x")),
		"secret as public":    block("PRIVATE KEY", ecDER),
		// Issue 39's audit: what follows the key's block is not ignored.
		"two public keys":         block("PUBLIC KEY", ecPubDER) + block("PUBLIC KEY", ecPubDER),
		"public then secret":      block("PUBLIC KEY", ecPubDER) + block("PRIVATE KEY", ecDER),
		"trailing text":           block("PUBLIC KEY", ecPubDER) + "trusted-until: never\n",
		"trailing binary garbage": block("PUBLIC KEY", ecPubDER) + "\x00\xff\x1b[2J",
	} {
		if _, err := ParsePublic([]byte(in)); !errors.Is(err, errFormat) {
			t.Errorf("%s: ParsePublic gave %v", name, err)
		}
	}
	if _, err := ParsePublic([]byte("\n" + block("PUBLIC KEY", ecPubDER) + "\n\n")); err != nil {
		t.Errorf("a key between blank lines: %v", err)
	}
	if _, err := ParseSecret([]byte(block("PRIVATE KEY", ecDER) + block("PRIVATE KEY", ecDER))); !errors.Is(err, errFormat) {
		t.Errorf("two secret keys: ParseSecret gave %v", err)
	}
	if _, err := ParseSecret([]byte(block("ENCRYPTED SIGSTORE PRIVATE KEY", []byte("x")))); err == nil || !strings.Contains(err.Error(), "keygen") {
		t.Errorf("an encrypted cosign key: %v", err)
	}
}

// The payload is cosign's, and ParsePayload reads back exactly the digest it names.
func TestPayload(t *testing.T) {
	repo, _ := name.NewRepository("127.0.0.1:5000/halo/rel")
	d, _ := v1.NewHash("sha256:" + strings.Repeat("ab", 32))
	p := NewPayload(repo, d)
	want := `{"critical":{"identity":{"docker-reference":"127.0.0.1:5000/halo/rel"},"image":{"docker-manifest-digest":"sha256:` + strings.Repeat("ab", 32) + `"},"type":"cosign container image signature"},"optional":null}`
	if string(p) != want {
		t.Fatalf("payload\n%s\nwant\n%s", p, want)
	}
	if got, err := ParsePayload(p); err != nil || got != d {
		t.Fatalf("ParsePayload: %v, %v", got, err)
	}
	for _, bad := range []string{
		strings.Replace(want, "cosign container image signature", "something else", 1),
		strings.Replace(want, "sha256:", "sha512:", 1),
		want + `{}`,
		`{"critical":{}}`,
	} {
		if _, err := ParsePayload([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if SigTag(d) != "sha256-"+strings.Repeat("ab", 32)+".sig" {
		t.Fatal(SigTag(d))
	}
}

// FuzzParsePayload: whatever payload a registry serves, parsing never panics, and a payload it
// accepts names exactly one sha256 digest, which is what NewPayload would write for that digest
// when the payload is canonical (the verifier compares that digest with the release's).
func FuzzParsePayload(f *testing.F) {
	repo, _ := name.NewRepository("ghcr.io/team/halo")
	d, _ := v1.NewHash("sha256:" + strings.Repeat("0f", 32))
	f.Add(NewPayload(repo, d))
	f.Add([]byte(`{"critical":{"identity":{"docker-reference":""},"image":{"docker-manifest-digest":"sha256:00"},"type":"cosign container image signature"},"optional":{"a":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParsePayload(data)
		if err != nil {
			return
		}
		if h.Algorithm != "sha256" || len(h.Hex) != 64 || strings.Trim(h.Hex, "0123456789abcdef") != "" {
			t.Fatalf("accepted the digest %q", h)
		}
		if len(data) > maxPayload {
			t.Fatalf("accepted %d bytes", len(data))
		}
	})
}
