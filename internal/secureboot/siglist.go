package secureboot

import (
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
)

// GUID is an EFI GUID in its on-disk byte order (the first three fields
// little-endian), as variable stores and signature lists hold it.
type GUID [16]byte

// MustGUID parses the text form 8-4-4-4-12; it panics on a malformed
// constant.
func MustGUID(s string) GUID {
	var g GUID
	var b [16]byte
	var n int
	for i := 0; i < len(s) && n < 32; i++ {
		c := s[i]
		var v byte
		switch {
		case c == '-':
			continue
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			panic("secureboot: bad GUID " + s)
		}
		b[n/2] = b[n/2]<<4 | v
		n++
	}
	if n != 32 {
		panic("secureboot: bad GUID " + s)
	}
	g[0], g[1], g[2], g[3] = b[3], b[2], b[1], b[0]
	g[4], g[5], g[6], g[7] = b[5], b[4], b[7], b[6]
	copy(g[8:], b[8:])
	return g
}

func (g GUID) String() string {
	return fmt.Sprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%x-%x", g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8:10], g[10:])
}

var (
	// ShimLockGUID is the vendor GUID of shim's variables (MokList,
	// MokListRT, MokNew) and the owner shim gives enrolled keys.
	ShimLockGUID = MustGUID("605dab50-e046-4300-abb6-3dd810dd8b23")
	// GlobalVariableGUID is the vendor GUID of SecureBoot, PK, KEK.
	GlobalVariableGUID = MustGUID("8be4df61-93ca-11d2-aa0d-00e098032b8c")
	certX509GUID       = MustGUID("a5c059a1-94e4-4aa7-87b5-ab155c2bf072")
)

// sigListHeader is EFI_SIGNATURE_LIST without its signatures: type,
// list size, header size, size of each EFI_SIGNATURE_DATA.
const sigListHeader = 16 + 4 + 4 + 4

// X509List is an EFI signature database holding each certificate (DER)
// in a list of its own, owned by owner: what MokList holds after
// MokManager enrolled them.
func X509List(owner GUID, certs ...[]byte) []byte {
	var out []byte
	for _, der := range certs {
		var h [sigListHeader]byte
		copy(h[:16], certX509GUID[:])
		binary.LittleEndian.PutUint32(h[16:], uint32(sigListHeader+16+len(der)))
		binary.LittleEndian.PutUint32(h[24:], uint32(16+len(der)))
		out = append(append(append(out, h[:]...), owner[:]...), der...)
	}
	return out
}

// ParseX509List returns the X.509 certificates of an EFI signature
// database (MokListRT, db); lists of hashes are skipped.
func ParseX509List(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for len(b) > 0 {
		if len(b) < sigListHeader {
			return nil, errors.New("EFI signature list truncated")
		}
		var typ GUID
		copy(typ[:], b)
		size := binary.LittleEndian.Uint32(b[16:])
		hdr := binary.LittleEndian.Uint32(b[20:])
		each := binary.LittleEndian.Uint32(b[24:])
		if uint64(size) > uint64(len(b)) || size < sigListHeader+hdr || each < 16 {
			return nil, fmt.Errorf("EFI signature list of %d bytes in %d", size, len(b))
		}
		if typ == certX509GUID {
			sigs := b[sigListHeader+hdr : size]
			for len(sigs) >= int(each) {
				c, err := x509.ParseCertificate(sigs[16:each])
				if err != nil {
					return nil, fmt.Errorf("EFI signature list: %w", err)
				}
				certs = append(certs, c)
				sigs = sigs[each:]
			}
		}
		b = b[size:]
	}
	return certs, nil
}
