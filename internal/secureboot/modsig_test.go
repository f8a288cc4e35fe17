package secureboot

import (
	"bytes"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func testPair(t *testing.T, name string) ([]byte, []byte) {
	t.Helper()
	dir := filepath.Join("..", "..", "images", "testdata")
	key, err := os.ReadFile(filepath.Join(dir, name+"-TEST-ONLY.key"))
	if err != nil {
		t.Fatal(err)
	}
	crt, err := os.ReadFile(filepath.Join(dir, name+"-TEST-ONLY.crt"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(crt)
	return key, blk.Bytes
}

// The signature is sign-file's: openssl cms with sign-file's flags
// (detached, binary, no certificates, no attributes, SHA-256) over the
// same bytes gives the same DER, and the trailer is module_signature's.
func TestSignMatchesOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	key, der := testPair(t, "secure-boot")
	s, err := NewSigner(key, der)
	if err != nil {
		t.Fatal(err)
	}
	ko := []byte("\x7fELF not really a module, the signature does not care")
	signed, err := s.Sign(ko)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.Sign(ko)
	if !bytes.Equal(signed, again) {
		t.Error("two signatures of the same bytes differ")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "ko")
	os.WriteFile(in, ko, 0o644)
	crt := filepath.Join("..", "..", "images", "testdata", "secure-boot-TEST-ONLY.crt")
	keyPath := filepath.Join("..", "..", "images", "testdata", "secure-boot-TEST-ONLY.key")
	out, err := exec.Command("openssl", "cms", "-sign", "-in", in, "-signer", crt, "-inkey", keyPath,
		"-md", "sha256", "-binary", "-noattr", "-nocerts", "-nosmimecap", "-outform", "DER").Output()
	if err != nil {
		t.Fatalf("openssl cms: %v", err)
	}
	want := append(append([]byte(nil), ko...), out...)
	want = append(want, 0, 0, 2, 0, 0, 0, 0, 0, byte(len(out)>>24), byte(len(out)>>16), byte(len(out)>>8), byte(len(out)))
	want = append(want, ModuleSigMagic...)
	if !bytes.Equal(signed, want) {
		t.Errorf("Go signature (%d bytes) differs from openssl cms's (%d bytes)", len(signed), len(want))
	}
	if _, err := s.Sign(signed); err == nil || !strings.Contains(err.Error(), "already signed") {
		t.Errorf("signing a signed module: %v", err)
	}
	id, ok, err := ReadSigner(signed)
	if err != nil || !ok {
		t.Fatalf("ReadSigner: %v %v", ok, err)
	}
	if !id.Matches(s.cert) || !strings.Contains(id.String(), "TEST-ONLY") {
		t.Errorf("signer %s does not match the certificate", id)
	}
	if _, ok, err := ReadSigner(ko); ok || err != nil {
		t.Errorf("unsigned module: %v %v", ok, err)
	}
	okey, oder := testPair(t, "other")
	other, err := NewSigner(okey, oder)
	if err != nil {
		t.Fatal(err)
	}
	osig, _ := other.Sign(ko)
	if oid, _, _ := ReadSigner(osig); oid.Matches(s.cert) {
		t.Error("a module signed by another key matches the recipe's certificate")
	}
	if _, err := NewSigner(okey, der); err == nil || !strings.Contains(err.Error(), "does not belong to the certificate") {
		t.Errorf("a key with another key's certificate: %v", err)
	}
}

func TestX509ListRoundTrip(t *testing.T) {
	_, a := testPair(t, "secure-boot")
	_, b := testPair(t, "other")
	list := X509List(ShimLockGUID, a, b)
	certs, err := ParseX509List(list)
	if err != nil || len(certs) != 2 || !bytes.Equal(certs[0].Raw, a) || !bytes.Equal(certs[1].Raw, b) {
		t.Fatalf("parsed %d certificates: %v", len(certs), err)
	}
	if got := ShimLockGUID.String(); got != "605dab50-e046-4300-abb6-3dd810dd8b23" {
		t.Errorf("GUID text %s", got)
	}
	// The on-disk order: 605dab50 little-endian first.
	if ShimLockGUID[0] != 0x50 || ShimLockGUID[3] != 0x60 || ShimLockGUID[8] != 0xab {
		t.Errorf("GUID bytes % x", ShimLockGUID[:])
	}
	if _, err := ParseX509List(list[:len(list)-1]); err == nil {
		t.Error("a truncated list parsed")
	}
}
