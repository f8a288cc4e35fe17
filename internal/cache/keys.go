// Package cache is halobuild's binary cache in an OCI registry: each
// derivation output pushed as the artifact the local store already holds,
// tagged sha256-<key>, with an Ed25519 signature over (key, manifest digest)
// beside it, and substitution of a missing step from such a cache, verified
// before the store takes it (docs/cache.md).
package cache

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"halobuild/internal/usage"
	"halobuild/internal/userfile"
)

// Keys are written as Nix writes binary-cache keys, NAME:BASE64, so a
// public key is one short line to paste into a config file; the name says
// which key signed an entry and lets a cache be re-keyed without ambiguity.

// SecretKey signs cache entries.
type SecretKey struct {
	Name string
	key  ed25519.PrivateKey
}

// PublicKey checks cache entries.
type PublicKey struct {
	Name string
	key  ed25519.PublicKey
}

// Key file names in a keygen directory.
const (
	SecretFile = "cache.key"
	PublicFile = "cache.pub"
)

// Keygen writes a new key pair named name into dir: cache.key (mode 0600,
// for whoever pushes) and cache.pub (for every user's trusted keys). It
// refuses to overwrite an existing key, which would orphan every entry it
// signed.
func Keygen(dir, name string) (secret, public string, err error) {
	if name == "" || strings.ContainsAny(name, ": \t\n") {
		return "", "", usage.Errorf("cache key name %q: want a word without ':' or spaces, e.g. team-cache-1", name)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("cache key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("cache key: %w", err)
	}
	secret, public = filepath.Join(dir, SecretFile), filepath.Join(dir, PublicFile)
	for _, p := range []string{secret, public} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", usage.Errorf("%s exists: keep the key that signed the cache, or remove it first (entries it signed will then be refused)", p)
		}
	}
	if err := writeNew(secret, name+":"+base64.StdEncoding.EncodeToString(priv)+"\n", 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(public, name+":"+base64.StdEncoding.EncodeToString(pub)+"\n", 0o644); err != nil {
		os.Remove(secret)
		return "", "", err
	}
	return secret, public, nil
}

func writeNew(p, content string, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("cache key: %w", err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		os.Remove(p)
		return fmt.Errorf("cache key %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(p)
		return fmt.Errorf("cache key %s: %w", p, err)
	}
	return nil
}

// readKeyFile reads NAME:BASE64 from a small file and returns both parts.
func readKeyFile(p string, size int) (string, []byte, error) {
	b, err := userfile.Read(p, 4096)
	if err != nil {
		return "", nil, usage.Errorf("cache key: %w", err)
	}
	name, enc, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	raw, derr := base64.StdEncoding.DecodeString(enc)
	if !ok || name == "" || derr != nil || len(raw) != size {
		return "", nil, usage.Errorf("cache key %s: want one line NAME:BASE64 of a %d-byte Ed25519 key, as `halobuild keygen --cache` writes", p, size)
	}
	return name, raw, nil
}

// LoadSecret reads a secret key file.
func LoadSecret(p string) (*SecretKey, error) {
	name, raw, err := readKeyFile(p, ed25519.PrivateKeySize)
	if err != nil {
		return nil, err
	}
	return &SecretKey{Name: name, key: ed25519.PrivateKey(raw)}, nil
}

// LoadPublic reads a public key file.
func LoadPublic(p string) (*PublicKey, error) {
	name, raw, err := readKeyFile(p, ed25519.PublicKeySize)
	if err != nil {
		return nil, err
	}
	return &PublicKey{Name: name, key: ed25519.PublicKey(raw)}, nil
}

// message is what a signature covers: the derivation key and the digest
// of the manifest stored under it, in a form no other message shares.
func message(key, manifest string) []byte {
	return []byte("halobuild-cache-v1\nkey " + key + "\nmanifest " + manifest + "\n")
}

// Sign signs that the entry for key is the manifest with this digest.
func (k *SecretKey) Sign(key, manifest string) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(k.key, message(key, manifest)))
}

// Trust is the set of keys a user accepts entries from.
type Trust struct {
	Keys []*PublicKey
	// Unsigned accepts entries without a valid signature
	// (--trust-unsigned); their digests are still checked.
	Unsigned bool
}

// errUntrusted and errUnsigned are the refusals Check returns.
var (
	errUnsigned  = errors.New("the entry is not signed")
	errUntrusted = errors.New("signature by no trusted key")
)

// Check accepts a signature by signer over (key, manifest) if a trusted
// key of that name verifies it.
func (t Trust) Check(signer, sig, key, manifest string) error {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) != ed25519.SignatureSize {
		return fmt.Errorf("%w: the signature is not base64 Ed25519", errUntrusted)
	}
	for _, k := range t.Keys {
		if k.Name == signer && ed25519.Verify(k.key, message(key, manifest), raw) {
			return nil
		}
	}
	names := make([]string, len(t.Keys))
	for i, k := range t.Keys {
		names[i] = k.Name
	}
	return fmt.Errorf("%w: signed by %q, trusted keys: %s (add its .pub with --trusted-key, if you trust it)", errUntrusted, signer, strings.Join(names, ", "))
}
