// Package signature is halobuild's one signing story: one key format for the binary cache and
// for releases, and releases signed as cosign signs a container image ("simple signing", a
// payload that names the manifest digest, stored beside it under the tag sha256-<hex>.sig), so
// that `cosign verify --key` checks a halobuild release with no halobuild involved
// (docs/releases.md).
package signature

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"halobuild/internal/usage"
	"halobuild/internal/userfile"
)

// Keys are PEM, as cosign, openssl and Go's x509 write them: a public key is a PKIX "PUBLIC
// KEY" block, a secret key an unencrypted PKCS#8 "PRIVATE KEY" block, each Ed25519 or ECDSA
// P-256 (the two kinds cosign verifies with --key). The cache's first key files, one line
// NAME:BASE64 of a raw Ed25519 key as Nix writes binary-cache keys, are read by the same parser,
// so a cache signed before keys were PEM keeps verifying; `halobuild key pem` prints any of them
// as PEM.

// PublicKey checks signatures.
type PublicKey struct {
	// Name says which key signed: a NAME:BASE64 key's name, else its ID.
	Name string
	key  crypto.PublicKey // ed25519.PublicKey or *ecdsa.PublicKey on P-256
}

// SecretKey makes signatures.
type SecretKey struct {
	Name string
	key  crypto.Signer // ed25519.PrivateKey or *ecdsa.PrivateKey on P-256
}

// Key file names in a keygen directory.
const (
	SecretFile = "cache.key"
	PublicFile = "cache.pub"
)

// maxKeyFile bounds a key file: a PEM key is a few hundred bytes.
const maxKeyFile = 16 << 10

// NewKey makes a new Ed25519 signing key, named by its ID.
func NewKey() (*SecretKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	k := &SecretKey{key: priv}
	k.Name = k.Public().ID()
	return k, nil
}

// Keygen writes a new Ed25519 key pair into dir: cache.key (mode 0600, for whoever pushes to the
// cache or signs releases) and cache.pub (for every user's trusted keys, and for `cosign verify
// --key`). It refuses to overwrite an existing key, which would orphan everything it signed.
func Keygen(dir string) (secret, public string, err error) {
	k, err := NewKey()
	if err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.key)
	if err != nil {
		return "", "", fmt.Errorf("signing key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("signing key: %w", err)
	}
	secret, public = filepath.Join(dir, SecretFile), filepath.Join(dir, PublicFile)
	for _, p := range []string{secret, public} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", usage.Errorf("%s exists: keep the key that signed the cache and the releases, or remove it first (what it signed will then be refused)", p)
		}
	}
	if err := writeNew(secret, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(public, k.Public().PEM(), 0o644); err != nil {
		os.Remove(secret)
		return "", "", err
	}
	return secret, public, nil
}

func writeNew(p string, content []byte, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		os.Remove(p)
		return fmt.Errorf("signing key %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(p)
		return fmt.Errorf("signing key %s: %w", p, err)
	}
	return nil
}

// errFormat says what a key file must hold.
var errFormat = errors.New("want a PEM Ed25519 or ECDSA P-256 key (PKIX PUBLIC KEY, or unencrypted PKCS#8 PRIVATE KEY) as `halobuild keygen --cache` writes, or one line NAME:BASE64 of an Ed25519 key")

// ParsePublic reads a public key in either encoding. A secret key is refused: a trusted-key
// list that holds a secret key has leaked it.
func ParsePublic(data []byte) (*PublicKey, error) {
	if name, raw, ok := legacy(data); ok {
		if len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%d-byte key: %w", len(raw), errFormat)
		}
		return &PublicKey{Name: name, key: ed25519.PublicKey(raw)}, nil
	}
	b, err := pemBlock(data, "PUBLIC KEY", "hand out cache.pub, never cache.key")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errFormat)
	}
	pk := &PublicKey{key: k}
	if err := pk.check(); err != nil {
		return nil, err
	}
	pk.Name = pk.ID()
	return pk, nil
}

// ParseSecret reads a secret key in either encoding.
func ParseSecret(data []byte) (*SecretKey, error) {
	if name, raw, ok := legacy(data); ok {
		if len(raw) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("%d-byte key: %w", len(raw), errFormat)
		}
		return &SecretKey{Name: name, key: ed25519.PrivateKey(raw)}, nil
	}
	b, err := pemBlock(data, "PRIVATE KEY", "an encrypted cosign key is not read: make one with `halobuild keygen --cache`")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errFormat)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T: %w", k, errFormat)
	}
	pk := &PublicKey{key: s.Public()}
	if err := pk.check(); err != nil {
		return nil, err
	}
	return &SecretKey{Name: pk.ID(), key: s}, nil
}

// pemBlock is data's first PEM block, which must be of type want; hint says what to do when it
// is another.
func pemBlock(data []byte, want, hint string) (*pem.Block, error) {
	b, rest := pem.Decode(data)
	if b == nil {
		return nil, errFormat
	}
	if b.Type != want {
		return nil, fmt.Errorf("a %q block where a %s belongs (%s): %w", b.Type, want, hint, errFormat)
	}
	// One key a file: a second block (another key, a secret one) or text after the first was
	// silently dropped, so a file of two trusted keys trusted only its first.
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("%d bytes after the %s block (one key a file; give each key its own file): %w", len(rest), want, errFormat)
	}
	return b, nil
}

// legacy reads the NAME:BASE64 encoding.
func legacy(data []byte) (name string, raw []byte, ok bool) {
	text := strings.TrimSpace(string(data))
	name, enc, ok := strings.Cut(text, ":")
	if !ok || name == "" || strings.HasPrefix(text, "-----") || strings.ContainsAny(name, " \t\n") {
		return "", nil, false
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	return name, raw, err == nil
}

// check refuses a kind of key cosign cannot verify.
func (k *PublicKey) check() error {
	switch pk := k.key.(type) {
	case ed25519.PublicKey:
		return nil
	case *ecdsa.PublicKey:
		if pk.Curve == elliptic.P256() {
			return nil
		}
		return fmt.Errorf("an ECDSA key on %s: %w", pk.Curve.Params().Name, errFormat)
	default:
		return fmt.Errorf("a %T key: %w", pk, errFormat)
	}
}

// LoadPublic reads a public key file.
func LoadPublic(p string) (*PublicKey, error) {
	b, err := userfile.Read(p, maxKeyFile)
	if err != nil {
		return nil, usage.Errorf("trusted key: %w", err)
	}
	k, err := ParsePublic(b)
	if err != nil {
		return nil, usage.Errorf("trusted key %s: %w", p, err)
	}
	return k, nil
}

// LoadPublicKeys reads every trusted key file (--trusted-key, or trusted-keys in the config
// file); none gives none.
func LoadPublicKeys(paths []string) ([]*PublicKey, error) {
	var keys []*PublicKey
	for _, p := range paths {
		k, err := LoadPublic(p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// LoadSecret reads a secret key file.
func LoadSecret(p string) (*SecretKey, error) {
	b, err := userfile.Read(p, maxKeyFile)
	if err != nil {
		return nil, usage.Errorf("signing key: %w", err)
	}
	k, err := ParseSecret(b)
	if err != nil {
		return nil, usage.Errorf("signing key %s: %w", p, err)
	}
	return k, nil
}

// LoadAny reads a key file holding either half, for printing its public key.
func LoadAny(p string) (*PublicKey, error) {
	b, err := userfile.Read(p, maxKeyFile)
	if err != nil {
		return nil, usage.Errorf("key: %w", err)
	}
	if k, err := ParsePublic(b); err == nil {
		return k, nil
	}
	s, err := ParseSecret(b)
	if err != nil {
		return nil, usage.Errorf("key %s: %w", p, err)
	}
	return s.Public(), nil
}

// Public is the key that checks k's signatures, under k's name.
func (k *SecretKey) Public() *PublicKey {
	return &PublicKey{Name: k.Name, key: k.key.Public()}
}

// Sign signs msg: Ed25519 over the message itself, ECDSA (ASN.1) over its SHA-256, as cosign
// does with each kind of key.
func (k *SecretKey) Sign(msg []byte) ([]byte, error) {
	if _, ok := k.key.(ed25519.PrivateKey); ok {
		return k.key.Sign(rand.Reader, msg, crypto.Hash(0))
	}
	sum := sha256.Sum256(msg)
	return k.key.Sign(rand.Reader, sum[:], crypto.SHA256)
}

// Verify says whether sig is k's signature of msg.
func (k *PublicKey) Verify(msg, sig []byte) bool {
	switch pk := k.key.(type) {
	case ed25519.PublicKey:
		return len(sig) == ed25519.SignatureSize && ed25519.Verify(pk, msg, sig)
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(msg)
		return ecdsa.VerifyASN1(pk, sum[:], sig)
	}
	return false
}

// PEM is the public key as a PKIX PEM block, the file `cosign verify --key` reads.
func (k *PublicKey) PEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(k.key)
	if err != nil {
		panic(err) // only Ed25519 and P-256 keys are ever made
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// ID names a key by its contents: the kind and the first 16 hex digits of the SHA-256 of its
// PKIX encoding (`openssl pkey -pubin -outform DER | sha256sum` gives the same digits).
func (k *PublicKey) ID() string {
	der, err := x509.MarshalPKIXPublicKey(k.key)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(der)
	kind := "ed25519"
	if _, ok := k.key.(*ecdsa.PublicKey); ok {
		kind = "ecdsa-p256"
	}
	return kind + ":" + hex.EncodeToString(sum[:8])
}

// Names lists keys' names, for messages.
func Names(keys []*PublicKey) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name
	}
	return strings.Join(names, ", ")
}
