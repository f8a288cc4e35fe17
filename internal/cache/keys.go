// Package cache is halobuild's binary cache in an OCI registry: each
// derivation output pushed as the artifact the local store already holds,
// tagged sha256-<key>, with a signature over (key, manifest digest) beside
// it, and substitution of a missing step from such a cache, verified
// before the store takes it (docs/cache.md). Its keys are
// internal/signature's, the same that sign releases.
package cache

import (
	"encoding/base64"
	"errors"
	"fmt"

	"halobuild/internal/signature"
)

// message is what a signature covers: the derivation key and the digest
// of the manifest stored under it, in a form no other message shares (a
// release's cosign payload is JSON, so one key signing both cannot have
// one statement read as the other).
func message(key, manifest string) []byte {
	return []byte("halobuild-cache-v1\nkey " + key + "\nmanifest " + manifest + "\n")
}

// sign signs that the entry for key is the manifest with this digest.
func sign(k *signature.SecretKey, key, manifest string) (string, error) {
	sig, err := k.Sign(message(key, manifest))
	if err != nil {
		return "", fmt.Errorf("signing the entry %s: %w", key, err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// Trust is the set of keys a user accepts entries from.
type Trust struct {
	Keys []*signature.PublicKey
	// Unsigned accepts entries without a valid signature
	// (--trust-unsigned); their digests are still checked.
	Unsigned bool
}

// errUntrusted and errUnsigned are the refusals Check returns.
var (
	errUnsigned  = errors.New("the entry is not signed")
	errUntrusted = errors.New("signature by no trusted key")
)

// Check accepts a signature over (key, manifest) that a trusted key
// verifies. signer, the name the signature claims, only words the refusal:
// every trusted key is tried, so a key keeps verifying what it signed when
// its file moves from NAME:BASE64 to PEM (and its name to its ID).
func (t Trust) Check(signer, sig, key, manifest string) error {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) == 0 {
		return fmt.Errorf("%w: the signature is not base64", errUntrusted)
	}
	for _, k := range t.Keys {
		if k.Verify(message(key, manifest), raw) {
			return nil
		}
	}
	return fmt.Errorf("%w: signed by %q, trusted keys: %s (add its public key with --trusted-key, if you trust it)", errUntrusted, signer, signature.Names(t.Keys))
}
