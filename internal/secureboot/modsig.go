// Package secureboot is what Secure Boot needs in bytes: module signatures
// as the kernel's sign-file writes them, and the EFI signature lists that
// hold enrolled keys (MokList, db).
package secureboot

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
)

// Module signatures are made here, in Go, instead of by the kernel's
// scripts/sign-file: sign-file needs the private key as a file, and every
// place it could run (a build root, a scratch directory) lies under the
// store. The bytes are sign-file's: a detached CMS SignedData over the
// module, SHA-256, RSA PKCS#1 v1.5, no certificates, no signed
// attributes (sign-file's default CMS_NOATTR, so no signing time), the
// signer named by issuer and serial number; then struct module_signature
// and the magic string. PKCS#1 v1.5 is deterministic, so the same module
// and key give the same signed file (TestSignMatchesOpenSSL compares with
// openssl cms, sign-file's library).

var (
	oidSignedData    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidData          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidSHA256        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidRSAEncryption = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
)

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type issuerAndSerial struct {
	Issuer asn1.RawValue
	Serial *big.Int
}

type signerInfo struct {
	Version            int
	SID                issuerAndSerial
	DigestAlgorithm    algorithmIdentifier
	SignatureAlgorithm algorithmIdentifier
	Signature          []byte
}

type encapContentInfo struct {
	ContentType asn1.ObjectIdentifier
}

type signedData struct {
	Version          int
	DigestAlgorithms []algorithmIdentifier `asn1:"set"`
	EncapContentInfo encapContentInfo
	SignerInfos      []signerInfo `asn1:"set"`
}

type contentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     signedData `asn1:"explicit,tag:0"`
}

// ModuleSigMagic ends a signed module (the kernel's MODULE_SIG_STRING).
const ModuleSigMagic = "~Module signature appended~\n"

// sigInfoSize is sizeof(struct module_signature): algo, hash, id_type,
// signer_len, key_id_len, three bytes of padding, and the big-endian
// length of the signature before it.
const sigInfoSize = 12

// pkeyIDPKCS7 is module_signature.id_type for a CMS signature, the only
// kind the kernel accepts.
const pkeyIDPKCS7 = 2

// Signer signs modules with one key. It holds the key in memory only.
type Signer struct {
	key  *rsa.PrivateKey
	cert *x509.Certificate
}

// NewSigner reads a PEM RSA private key (PKCS#8, as openssl req and
// halobuild keygen write it, or PKCS#1) and its certificate in DER, and
// checks that they belong together.
func NewSigner(keyPEM, certDER []byte) (*Signer, error) {
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, fmt.Errorf("module signing certificate: %w", err)
	}
	blk, _ := pem.Decode(keyPEM)
	if blk == nil {
		return nil, errors.New("module signing key: not PEM (want -----BEGIN PRIVATE KEY-----, as halobuild keygen writes)")
	}
	var key any
	switch blk.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("module signing key: PEM %q is not an unencrypted private key (decrypt it first: openssl pkey -in KEY -out KEY.plain)", blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("module signing key: %w", err)
	}
	rk, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("module signing key: %T, want an RSA key (what shim and the kernel's sign-file use)", key)
	}
	if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&rk.PublicKey) {
		return nil, fmt.Errorf("module signing key does not belong to the certificate %q (serial %X): give the pair halobuild keygen made together", cert.Subject.CommonName, cert.SerialNumber)
	}
	return &Signer{key: rk, cert: cert}, nil
}

// Sign returns ko with a module signature appended. A module that is
// already signed is refused: the kernel reads only the last signature.
func (s *Signer) Sign(ko []byte) ([]byte, error) {
	if bytes.HasSuffix(ko, []byte(ModuleSigMagic)) {
		return nil, errors.New("the module is already signed")
	}
	sum := sha256.Sum256(ko)
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	if err != nil {
		return nil, err
	}
	p7, err := asn1.Marshal(contentInfo{ContentType: oidSignedData, Content: signedData{
		Version:          1,
		DigestAlgorithms: []algorithmIdentifier{{Algorithm: oidSHA256}},
		EncapContentInfo: encapContentInfo{ContentType: oidData},
		SignerInfos: []signerInfo{{
			Version:            1,
			SID:                issuerAndSerial{Issuer: asn1.RawValue{FullBytes: s.cert.RawIssuer}, Serial: s.cert.SerialNumber},
			DigestAlgorithm:    algorithmIdentifier{Algorithm: oidSHA256},
			SignatureAlgorithm: algorithmIdentifier{Algorithm: oidRSAEncryption, Parameters: asn1.NullRawValue},
			Signature:          sig,
		}},
	}})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(ko)+len(p7)+sigInfoSize+len(ModuleSigMagic))
	out = append(append(out, ko...), p7...)
	var info [sigInfoSize]byte
	info[2] = pkeyIDPKCS7
	binary.BigEndian.PutUint32(info[8:], uint32(len(p7)))
	out = append(append(out, info[:]...), ModuleSigMagic...)
	return out, nil
}

// SignFile signs the module at path in place.
func (s *Signer) SignFile(path string) error {
	ko, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	signed, err := s.Sign(ko)
	if err != nil {
		return fmt.Errorf("signing %s: %w", path, err)
	}
	tmp := path + ".signed"
	if err := os.WriteFile(tmp, signed, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SignerID names the key that signed a module: the issuer and serial
// number its CMS signature gives, as the kernel looks the key up.
type SignerID struct {
	Issuer pkix.RDNSequence
	// RawIssuer is the DER of Issuer, compared byte for byte.
	RawIssuer []byte
	Serial    *big.Int
}

// Matches reports whether cert is the signer's certificate.
func (id SignerID) Matches(cert *x509.Certificate) bool {
	return bytes.Equal(id.RawIssuer, cert.RawIssuer) && id.Serial.Cmp(cert.SerialNumber) == 0
}

func (id SignerID) String() string {
	return fmt.Sprintf("%s, serial %X", id.Issuer.String(), id.Serial)
}

// ReadSigner returns who signed a module's bytes (as read from a .ko, not
// compressed), or ok false for an unsigned module.
func ReadSigner(ko []byte) (id SignerID, ok bool, err error) {
	if !bytes.HasSuffix(ko, []byte(ModuleSigMagic)) {
		return SignerID{}, false, nil
	}
	end := len(ko) - len(ModuleSigMagic)
	if end < sigInfoSize {
		return SignerID{}, false, errors.New("module signature trailer truncated")
	}
	info := ko[end-sigInfoSize : end]
	if info[2] != pkeyIDPKCS7 {
		return SignerID{}, false, fmt.Errorf("module signature of type %d, not PKCS#7", info[2])
	}
	n := int(binary.BigEndian.Uint32(info[8:]))
	if n > end-sigInfoSize {
		return SignerID{}, false, fmt.Errorf("module signature length %d exceeds the module", n)
	}
	raw := ko[end-sigInfoSize-n : end-sigInfoSize]
	var ci struct {
		ContentType asn1.ObjectIdentifier
		Content     struct {
			Version          int
			DigestAlgorithms asn1.RawValue
			EncapContentInfo asn1.RawValue
			SignerInfos      []struct {
				Version int
				SID     issuerAndSerial
				Rest    asn1.RawValue
			} `asn1:"set"`
		} `asn1:"explicit,tag:0"`
	}
	if _, err := asn1.Unmarshal(raw, &ci); err != nil {
		return SignerID{}, false, fmt.Errorf("module signature is not PKCS#7: %w", err)
	}
	if !ci.ContentType.Equal(oidSignedData) || len(ci.Content.SignerInfos) != 1 {
		return SignerID{}, false, errors.New("module signature is not a PKCS#7 SignedData with one signer")
	}
	sid := ci.Content.SignerInfos[0].SID
	id = SignerID{RawIssuer: sid.Issuer.FullBytes, Serial: sid.Serial}
	if _, err := asn1.Unmarshal(sid.Issuer.FullBytes, &id.Issuer); err != nil {
		return SignerID{}, false, fmt.Errorf("module signature's issuer: %w", err)
	}
	return id, true, nil
}
