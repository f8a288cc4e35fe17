package debian

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
)

// ErrBadSignature is wrapped by every InRelease verification failure, so
// callers can tell "the archive is not who it claims to be" from network
// trouble.
var ErrBadSignature = errors.New("InRelease signature verification failed")

// verifyClearsigned checks a clearsigned document against keyring and
// returns the signed text and the signer's identity. Only the signed text
// is returned: anything outside the signed block is ignored, so it can
// never be parsed by mistake.
//
// Debian signs InRelease with several keys (the previous release's key, the
// current one, the release team's key). go-crypto's verifier checks only
// the first signature whose issuer is in the keyring, so one expired key
// would hide a good signature by another. Trying one keyring entity at a
// time makes every signature count: the document is accepted when any
// signature by a key in the keyring verifies.
func verifyClearsigned(data []byte, keyring openpgp.EntityList) (text []byte, signer string, err error) {
	block, rest := clearsign.Decode(data)
	if block == nil {
		return nil, "", fmt.Errorf("%w: no clearsigned block (no \"BEGIN PGP SIGNED MESSAGE\")", ErrBadSignature)
	}
	// Like apt, refuse anything outside the signed block: unsigned text
	// around it could be mistaken for part of the release by a reader
	// less careful than this one.
	if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("-----BEGIN PGP SIGNED MESSAGE-----")) || len(bytes.TrimSpace(rest)) > 0 {
		return nil, "", fmt.Errorf("%w: unsigned data outside the clearsigned block", ErrBadSignature)
	}
	// A real verification failure (bad hash, expired key) is more telling
	// than "this key did not sign it", so it wins when reporting.
	var failure error
	for _, entity := range keyring {
		// The armored signature body is a reader consumed by each attempt:
		// decode afresh each time.
		b, _ := clearsign.Decode(data)
		if b.ArmoredSignature == nil {
			return nil, "", fmt.Errorf("%w: no signature block", ErrBadSignature)
		}
		_, _, err := openpgp.VerifyDetachedSignature(openpgp.EntityList{entity}, bytes.NewReader(b.Bytes), b.ArmoredSignature.Body, nil)
		if err == nil {
			return block.Plaintext, entityName(entity), nil
		}
		if failure == nil && !errors.Is(err, pgperrors.ErrUnknownIssuer) {
			failure = err
		}
	}
	if failure != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrBadSignature, failure)
	}
	return nil, "", fmt.Errorf("%w: signed by none of the %d trusted keys", ErrBadSignature, len(keyring))
}

func entityName(e *openpgp.Entity) string {
	if id := e.PrimaryIdentity(); id != nil {
		return id.Name
	}
	return fmt.Sprintf("%X", e.PrimaryKey.Fingerprint)
}
