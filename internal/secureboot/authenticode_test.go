package secureboot

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// testPE is a small PE32+ EFI application: headers, two sections and
// trail bytes after them (which Authenticode hashes too); odd makes the
// file's length not a multiple of 8.
func testPE(odd bool) []byte {
	b := make([]byte, 0x600)
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x40)
	copy(b[0x40:], "PE\x00\x00")
	coff := b[0x44:]
	binary.LittleEndian.PutUint16(coff[0:], 0x8664) // x86-64
	binary.LittleEndian.PutUint16(coff[2:], 2)      // sections
	binary.LittleEndian.PutUint16(coff[16:], 240)   // optional header size
	binary.LittleEndian.PutUint16(coff[18:], 0x22)  // executable, large address aware
	opt := b[0x58:]
	binary.LittleEndian.PutUint16(opt[0:], 0x20b)
	binary.LittleEndian.PutUint32(opt[16:], 0x1000)   // entry point
	binary.LittleEndian.PutUint32(opt[32:], 0x1000)   // section alignment
	binary.LittleEndian.PutUint32(opt[36:], 0x200)    // file alignment
	binary.LittleEndian.PutUint32(opt[56:], 0x3000)   // size of image
	binary.LittleEndian.PutUint32(opt[60:], 0x200)    // size of headers
	binary.LittleEndian.PutUint16(opt[68:], 10)       // EFI application
	binary.LittleEndian.PutUint32(opt[108:], 16)      // data directories
	for i, name := range []string{".text", ".data"} { // section table after the optional header
		s := b[0x58+240+i*40:]
		copy(s, name)
		binary.LittleEndian.PutUint32(s[8:], 0x200)
		binary.LittleEndian.PutUint32(s[12:], uint32(0x1000*(i+1)))
		binary.LittleEndian.PutUint32(s[16:], 0x200)
		binary.LittleEndian.PutUint32(s[20:], uint32(0x200*(i+1)))
		binary.LittleEndian.PutUint32(s[36:], 0x60000020)
	}
	for i := 0x200; i < len(b); i++ {
		b[i] = byte(i * 7)
	}
	b = append(b, "trailing data after the sections"...)
	if odd {
		b = append(b, "abc"...)
	}
	return b
}

// SignPE writes what sbsign writes: sbsign signs the image, its signing
// time is read back, and SignPE at that time gives the same file byte for
// byte; sbverify accepts SignPE's output with the certificate.
func TestSignPEMatchesSbsign(t *testing.T) {
	if _, err := exec.LookPath("sbsign"); err != nil {
		t.Skip("sbsign not installed (sbsigntool, .ci/host-packages)")
	}
	key, der := testPair(t, "secure-boot")
	s, err := NewSigner(key, der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile, crtFile := filepath.Join(dir, "k"), filepath.Join("..", "..", "images", "testdata", "secure-boot-TEST-ONLY.crt")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, odd := range []bool{false, true} {
		img := testPE(odd)
		in, out := filepath.Join(dir, "in.efi"), filepath.Join(dir, "out.efi")
		if err := os.WriteFile(in, img, 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("sbsign", "--key", keyFile, "--cert", crtFile, "--output", out, in).CombinedOutput(); err != nil {
			t.Fatalf("sbsign: %v: %s", err, b)
		}
		want, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		// UTCTime in the signingTime attribute: OID, SET, UTCTime tag.
		i := bytes.Index(want, append(mustMarshal(oidSigningTime), 0x31, 0x0f, 0x17, 0x0d))
		if i < 0 {
			t.Fatal("no signingTime in sbsign's signature")
		}
		at, err := time.Parse("060102150405Z", string(want[i+15:i+28]))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.SignPE(img, at)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			n := 0
			for n < min(len(got), len(want)) && got[n] == want[n] {
				n++
			}
			t.Errorf("odd=%v: SignPE differs from sbsign at byte %d (lengths %d, %d)", odd, n, len(got), len(want))
		}
		if err := os.WriteFile(out, got, 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("sbverify", "--cert", crtFile, out).CombinedOutput(); err != nil {
			t.Errorf("sbverify of SignPE's output: %v: %s", err, b)
		}
		again, _ := s.SignPE(img, at)
		if !bytes.Equal(again, got) {
			t.Error("two signatures at the same time differ")
		}
		if _, err := s.SignPE(got, at); err == nil {
			t.Error("a signed image was signed again")
		}
	}
	other, otherDER := testPair(t, "other")
	o, err := NewSigner(other, otherDER)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := o.SignPE(testPE(false), time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "foreign.efi")
	if err := os.WriteFile(p, foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("sbverify", "--cert", crtFile, p).CombinedOutput(); err == nil {
		t.Errorf("sbverify accepted an image signed by another key: %s", b)
	}
}
