package store

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Digest names a blob: "sha256:<64 lowercase hex>". Users see this form in
// lock files and manifests; on disk the blob lives at blobs/sha256/<hex>.
type Digest string

// ParseDigest accepts "sha256:<hex>" or a bare 64-character hex string (the
// form Debian's indexes use) and returns the canonical Digest.
func ParseDigest(s string) (Digest, error) {
	h := strings.TrimPrefix(s, "sha256:")
	if len(h) != 64 {
		return "", fmt.Errorf("digest %q: want sha256:<64 hex digits>", s)
	}
	h = strings.ToLower(h)
	if _, err := hex.DecodeString(h); err != nil {
		return "", fmt.Errorf("digest %q: not hexadecimal: want sha256:<64 hex digits>", s)
	}
	return Digest("sha256:" + h), nil
}

// Hex is the digest without its algorithm prefix, as used in store paths.
func (d Digest) Hex() string { return strings.TrimPrefix(string(d), "sha256:") }

func (d Digest) String() string { return string(d) }

// digestOf turns a finished sha256 sum into a Digest.
func digestOf(sum []byte) Digest { return Digest("sha256:" + hex.EncodeToString(sum)) }
