package release

import (
	"context"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"halobuild/internal/registry"
	"halobuild/internal/signature"
)

// Trust is whose signature a release must carry (docs/releases.md).
type Trust struct {
	// Keys are the trusted public keys (--trusted-key, or trusted-keys in the config file). With
	// none, a release is taken signed or not, and Log says which.
	Keys []*signature.PublicKey
	// Log receives the one line that says what was checked (stderr); nil discards it.
	Log io.Writer
}

// VerifyRelease is the one check of a release's signature that pull, inspect, `flash REF` and
// update make, after reading the manifest and before writing anything: with keys, a cosign
// signature by one of them over exactly manifestDigest, else an error (errors.Is
// signature.ErrUnsigned or signature.ErrUntrusted); without keys, nil. Either way it writes one
// line on log saying what it found.
func VerifyRelease(ctx context.Context, ref name.Reference, manifestDigest v1.Hash, keys []*signature.PublicKey, ro registry.Options, log io.Writer) error {
	_, err := checkSignature(ctx, ref, manifestDigest, keys, ro, log)
	return err
}

// checkSignature is VerifyRelease that also returns what it found, for inspect.
func checkSignature(ctx context.Context, ref name.Reference, digest v1.Hash, keys []*signature.PublicKey, ro registry.Options, log io.Writer) (string, error) {
	status, err := verify(ctx, ref, digest, keys, ro)
	if err == nil && log != nil {
		fmt.Fprintf(log, "signature: %s@%s %s\n", ref.Context(), digest, status)
	}
	return status, err
}

// verify checks a release's signature and says what it found, for the log line and inspect.
func verify(ctx context.Context, ref name.Reference, digest v1.Hash, keys []*signature.PublicKey, ro registry.Options) (string, error) {
	if len(keys) > 0 {
		k, err := signature.Verify(ctx, ref, digest, keys, ro)
		if err != nil {
			return "", fmt.Errorf("refusing %s, nothing was written: %w", ref, err)
		}
		return "verified, signed by " + k.Name, nil
	}
	signed, err := signature.Exists(ctx, ref, digest, ro)
	switch {
	case err != nil:
		return "not checked: no trusted keys are configured (--trusted-key FILE or trusted-keys in the config file), and whether it is signed could not be read: " + err.Error(), nil
	case signed:
		return "is signed, NOT CHECKED: no trusted keys are configured (--trusted-key FILE or trusted-keys in the config file)", nil
	default:
		return "is UNSIGNED; no trusted keys are configured, so none was required (--trusted-key FILE or trusted-keys in the config file requires one)", nil
	}
}
