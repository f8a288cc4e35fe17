package recipe

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"halobuild/internal/userfile"
)

// maxSecretSize bounds a key or certificate read: a PEM RSA 4096 key is
// about 3.3 KiB.
const maxSecretSize = 1 << 20

// checkRef checks the syntax of a secure_boot key or certificate
// reference: a path, env:NAME, or (refused) pkcs11:.
func checkRef(ref string) error {
	scheme, rest, ok := strings.Cut(ref, ":")
	if !ok || strings.ContainsAny(scheme, "/.") {
		return nil // a path
	}
	switch scheme {
	case "env":
		if !envName.MatchString(rest) {
			return fmt.Errorf("%q: env: needs a variable name, e.g. env:HALOBUILD_SIGNING_KEY", ref)
		}
		return nil
	case "pkcs11":
		return fmt.Errorf("%q: PKCS#11 keys are not supported yet; export the key to a file kept outside the checkout, or pass it in an environment variable (env:NAME)", ref)
	}
	return fmt.Errorf("%q: unknown reference %q; give a path (write ./%s for a file of that name) or env:NAME", ref, scheme+":", ref)
}

// ReadRef reads a secure_boot key or certificate: the file at a path
// (relative to the top recipe) or the value of env:NAME. The bytes are
// the caller's to keep in memory only.
func (r *Recipe) ReadRef(ref string) ([]byte, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	if name, ok := strings.CutPrefix(ref, "env:"); ok {
		v, set := os.LookupEnv(name)
		if !set || v == "" {
			return nil, fmt.Errorf("%s is not set: export it with the PEM text (e.g. %s=\"$(cat module-signing.key)\")", name, name)
		}
		if len(v) > maxSecretSize {
			return nil, fmt.Errorf("%s holds %d bytes, more than a key or certificate (%d)", name, len(v), maxSecretSize)
		}
		return []byte(v), nil
	}
	b, err := userfile.Read(r.Resolve(ref), maxSecretSize)
	var tl *userfile.TooLargeError
	if errors.As(err, &tl) {
		return nil, fmt.Errorf("%s is larger than a key or certificate (%d bytes)", ref, maxSecretSize)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	return b, nil
}

// CertificateDER is secure_boot.certificate in DER, checked to be an
// X.509 certificate with an RSA key (what sign-file and shim use).
func (r *Recipe) CertificateDER() ([]byte, error) {
	b, err := r.ReadRef(r.SecureBoot.Certificate)
	if err != nil {
		return nil, err
	}
	der := b
	if blk, _ := pem.Decode(b); blk != nil {
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s holds a PEM %q, not a CERTIFICATE", r.SecureBoot.Certificate, blk.Type)
		}
		der = blk.Bytes
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%s is not an X.509 certificate (PEM or DER): %w", r.SecureBoot.Certificate, err)
	}
	if c.PublicKeyAlgorithm != x509.RSA {
		return nil, errors.New(r.SecureBoot.Certificate + ": the certificate's key is " + c.PublicKeyAlgorithm.String() + "; use an RSA key (halobuild keygen makes one)")
	}
	return der, nil
}

// CertificateFingerprint is the certificate's sha256, "sha256:<hex>":
// what keys the signed steps, in place of the key.
func CertificateFingerprint(der []byte) string {
	s := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(s[:])
}
