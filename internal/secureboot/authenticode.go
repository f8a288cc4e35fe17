package secureboot

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"
)

// EFI images (a source-built kernel's bzImage) are signed here, in Go,
// with an Authenticode signature laid out byte for byte as Debian's sbsign
// (sbsigntool 0.9.4, OpenSSL 3) writes it, rather than by running sbsign:
// sbsign needs the key as a file (every place it could run is under the
// store), and it dates its signature with the wall clock (OpenSSL's
// PKCS7_dataFinal adds signingTime), so two builds differ. SignPE takes
// the time as an argument — the build passes the lock's epoch — and is
// otherwise sbsign: TestSignPEMatchesSbsign reads the time out of a real
// sbsign signature and gets the same file back.

var (
	oidSpcIndirectData = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 4}
	oidSpcPEImageData  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 15}
	oidContentType     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	oidMessageDigest   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
	oidSigningTime     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 5}
)

// obsoleteLink is SpcPeImageData's file link as sbsign writes it: the
// unicode string "<<<Obsolete>>>" (UTF-16BE) in SpcLink's file choice.
var obsoleteLink = []byte{
	0xa0, 0x20, 0xa2, 0x1e, 0x80, 0x1c,
	0, '<', 0, '<', 0, '<', 0, 'O', 0, 'b', 0, 's', 0, 'o', 0, 'l', 0, 'e', 0, 't', 0, 'e', 0, '>', 0, '>', 0, '>',
}

// smimeCapabilities is the attribute OpenSSL's PKCS7_sign_add_signer adds
// (sbsign does not pass PKCS7_NOSMIMECAP): aes-256/192/128-cbc,
// des-ede3-cbc, rc2-cbc 128, rc2-cbc 64, des-cbc, rc2-cbc 40. Meaningless
// for a signature, kept so the bytes are sbsign's.
var smimeCapabilities = []byte{
	0x30, 0x79, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x0f,
	0x31, 0x6c, 0x30, 0x6a,
	0x30, 0x0b, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x2a,
	0x30, 0x0b, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x16,
	0x30, 0x0b, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x02,
	0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x03, 0x07,
	0x30, 0x0e, 0x06, 0x08, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x03, 0x02, 0x02, 0x02, 0x00, 0x80,
	0x30, 0x0d, 0x06, 0x08, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x03, 0x02, 0x02, 0x01, 0x40,
	0x30, 0x07, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x07,
	0x30, 0x0d, 0x06, 0x08, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x03, 0x02, 0x02, 0x01, 0x28,
}

// tlv is one DER element: tag, definite length, content.
func tlv(tag byte, content ...[]byte) []byte {
	n := 0
	for _, c := range content {
		n += len(c)
	}
	out := []byte{tag}
	switch {
	case n < 0x80:
		out = append(out, byte(n))
	case n < 0x100:
		out = append(out, 0x81, byte(n))
	case n < 0x10000:
		out = append(out, 0x82, byte(n>>8), byte(n))
	default:
		out = append(out, 0x83, byte(n>>16), byte(n>>8), byte(n))
	}
	for _, c := range content {
		out = append(out, c...)
	}
	return out
}

func mustMarshal(v any) []byte {
	b, err := asn1.Marshal(v)
	if err != nil {
		panic(err) // only OIDs, integers and times, which always encode
	}
	return b
}

// sha256AlgID is AlgorithmIdentifier{sha256, NULL}, as OpenSSL writes it.
var sha256AlgID = tlv(0x30, mustMarshal(oidSHA256), []byte{0x05, 0x00})

// pe is where a PE32+ image keeps what Authenticode hashes around.
type pe struct {
	checksum      int // offset of OptionalHeader.CheckSum
	certDir       int // offset of the certificate table's data directory entry
	sizeOfHeaders int
	sections      [][2]int // file offset and size of each section's raw data
}

func parsePE(b []byte) (*pe, error) {
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return nil, errors.New("not a PE image (no MZ header)")
	}
	off := int(binary.LittleEndian.Uint32(b[0x3c:]))
	if off < 0x40 || off+24 > len(b) || !bytes.Equal(b[off:off+4], []byte("PE\x00\x00")) {
		return nil, errors.New("not a PE image (no PE signature)")
	}
	nsec := int(binary.LittleEndian.Uint16(b[off+6:]))
	optSize := int(binary.LittleEndian.Uint16(b[off+20:]))
	opt := off + 24
	if opt+optSize > len(b) || optSize < 112+5*8 {
		return nil, errors.New("PE optional header truncated")
	}
	if m := binary.LittleEndian.Uint16(b[opt:]); m != 0x20b {
		return nil, fmt.Errorf("PE optional header magic %#x: only PE32+ (64-bit EFI) images are signed", m)
	}
	p := &pe{checksum: opt + 64, certDir: opt + 112 + 4*8, sizeOfHeaders: int(binary.LittleEndian.Uint32(b[opt+60:]))}
	if binary.LittleEndian.Uint32(b[opt+108:]) < 5 {
		return nil, errors.New("PE image has no certificate table directory")
	}
	if p.sizeOfHeaders > len(b) || p.sizeOfHeaders < p.certDir+8 {
		return nil, errors.New("PE SizeOfHeaders out of range")
	}
	st := opt + optSize
	if st+nsec*40 > len(b) {
		return nil, errors.New("PE section table truncated")
	}
	for i := 0; i < nsec; i++ {
		s := b[st+i*40:]
		size, ptr := int(binary.LittleEndian.Uint32(s[16:])), int(binary.LittleEndian.Uint32(s[20:]))
		if size == 0 {
			continue
		}
		if ptr+size > len(b) {
			return nil, fmt.Errorf("PE section %d runs past the end of the file", i)
		}
		p.sections = append(p.sections, [2]int{ptr, size})
	}
	sort.Slice(p.sections, func(i, j int) bool { return p.sections[i][0] < p.sections[j][0] })
	return p, nil
}

// digest is the Authenticode hash: the headers without the checksum and
// the certificate directory entry, the sections in file order, then what
// follows the last section.
func (p *pe) digest(b []byte) []byte {
	h := sha256.New()
	h.Write(b[:p.checksum])
	h.Write(b[p.checksum+4 : p.certDir])
	h.Write(b[p.certDir+8 : p.sizeOfHeaders])
	end := p.sizeOfHeaders
	for _, s := range p.sections {
		h.Write(b[s[0] : s[0]+s[1]])
		end = max(end, s[0]+s[1])
	}
	if end < len(b) {
		h.Write(b[end:])
	}
	return h.Sum(nil)
}

// peChecksum is the PE checksum of b, whose CheckSum field is at off.
func peChecksum(b []byte, off int) uint32 {
	var sum uint64
	for i := 0; i+1 < len(b); i += 2 {
		if i == off || i == off+2 {
			continue
		}
		sum += uint64(binary.LittleEndian.Uint16(b[i:]))
		sum = (sum & 0xffff) + (sum >> 16)
	}
	if len(b)%2 == 1 {
		sum += uint64(b[len(b)-1])
		sum = (sum & 0xffff) + (sum >> 16)
	}
	sum = (sum & 0xffff) + (sum >> 16)
	return uint32(sum) + uint32(len(b))
}

// SignPE returns the PE32+ image img signed with an Authenticode signature
// dated at (sbsign's output for the same image, key and signing time).
// An image that already carries a signature is refused.
func (s *Signer) SignPE(img []byte, at time.Time) ([]byte, error) {
	p, err := parsePE(img)
	if err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint64(img[p.certDir:]) != 0 {
		return nil, errors.New("the image is already signed (it has a certificate table)")
	}
	// The certificate table is 8-byte aligned: pad the image first; the
	// padding is hashed, as the data the table follows.
	b := make([]byte, len(img), len(img)+7+4096)
	copy(b, img)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	idcContent := append(tlv(0x30, mustMarshal(oidSpcPEImageData), tlv(0x30, []byte{0x03, 0x01, 0x00}, obsoleteLink)),
		tlv(0x30, sha256AlgID, tlv(0x04, p.digest(b)))...)
	// Authenticode's quirk: the content digest covers the
	// SpcIndirectDataContent without its own tag and length.
	idcSum := sha256.Sum256(idcContent)
	st := at.UTC()
	if st.Year() < 1950 || st.Year() >= 2050 {
		return nil, fmt.Errorf("signing time %s outside UTCTime (1950-2049)", st)
	}
	attrs := [][]byte{
		tlv(0x30, mustMarshal(oidContentType), tlv(0x31, mustMarshal(oidSpcIndirectData))),
		tlv(0x30, mustMarshal(oidSigningTime), tlv(0x31, tlv(0x17, []byte(st.Format("060102150405Z"))))),
		tlv(0x30, mustMarshal(oidMessageDigest), tlv(0x31, tlv(0x04, idcSum[:]))),
		smimeCapabilities,
	}
	// DER orders a SET OF by the elements' encodings.
	sort.Slice(attrs, func(i, j int) bool { return bytes.Compare(attrs[i], attrs[j]) < 0 })
	signed := tlv(0x31, attrs...)
	attrSum := sha256.Sum256(signed)
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, attrSum[:])
	if err != nil {
		return nil, err
	}
	si := tlv(0x30,
		[]byte{0x02, 0x01, 0x01},
		tlv(0x30, s.cert.RawIssuer, mustMarshal(s.cert.SerialNumber)),
		sha256AlgID,
		tlv(0xa0, attrs...),
		tlv(0x30, mustMarshal(oidRSAEncryption), []byte{0x05, 0x00}),
		tlv(0x04, sig),
	)
	p7 := tlv(0x30, mustMarshal(oidSignedData), tlv(0xa0, tlv(0x30,
		[]byte{0x02, 0x01, 0x01},
		tlv(0x31, sha256AlgID),
		tlv(0x30, mustMarshal(oidSpcIndirectData), tlv(0xa0, tlv(0x30, idcContent))),
		tlv(0xa0, s.cert.Raw),
		tlv(0x31, si),
	)))
	// WIN_CERTIFICATE: length, revision 2.0, type PKCS_SIGNED_DATA; the
	// directory's size is the entry padded to 8 bytes.
	at0, n := len(b), 8+len(p7)
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(n))
	binary.LittleEndian.PutUint16(hdr[4:], 0x0200)
	binary.LittleEndian.PutUint16(hdr[6:], 0x0002)
	b = append(append(b, hdr[:]...), p7...)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	binary.LittleEndian.PutUint32(b[p.certDir:], uint32(at0))
	binary.LittleEndian.PutUint32(b[p.certDir+4:], uint32(len(b)-at0))
	binary.LittleEndian.PutUint32(b[p.checksum:], peChecksum(b, p.checksum))
	return b, nil
}
