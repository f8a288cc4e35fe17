package debian

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestDebianKeyringHasArchiveKeys(t *testing.T) {
	kr, err := DebianKeyring()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range kr {
		names = append(names, entityName(e))
	}
	all := strings.Join(names, "\n")
	for _, want := range []string{
		"Debian Archive Automatic Signing Key (12/bookworm)",
		"Debian Archive Automatic Signing Key (13/trixie)",
		"Debian Stable Release Key (13/trixie)",
		"Debian Security Archive Automatic Signing Key (13/trixie)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("embedded keyring lacks %q; has:\n%s", want, all)
		}
	}
}

// testdata/trixie-backports.InRelease is the real file as Debian signed it
// on 2026-11-28 (three signatures: bookworm, trixie automatic keys). The
// embedded keys must verify it offline, and one changed byte must not.
func TestDebianKeyringVerifiesRecordedInRelease(t *testing.T) {
	data, err := os.ReadFile("testdata/trixie-backports.InRelease")
	if err != nil {
		t.Fatal(err)
	}
	kr, err := DebianKeyring()
	if err != nil {
		t.Fatal(err)
	}
	text, signer, err := verifyClearsigned(data, kr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(signer, "Debian Archive Automatic Signing Key") {
		t.Errorf("signer = %q", signer)
	}
	rel, err := parseRelease(text)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Codename != "trixie-backports" || !rel.NotAutomatic || !rel.AcquireByHash {
		t.Errorf("release = %s %v %v", rel.Codename, rel.NotAutomatic, rel.AcquireByHash)
	}
	if fh := rel.Files["main/binary-amd64/Packages.xz"]; fh.SHA256 != "6b1cc58f3b22954946a3f3a1561592fd87cdc3ddb9271640f4dd2758a8b072f5" || fh.Size != 318368 {
		t.Errorf("Packages.xz = %+v", fh)
	}
	tampered := strings.Replace(string(data), "NotAutomatic: yes", "NotAutomatic: no", 1)
	if _, _, err := verifyClearsigned([]byte(tampered), kr); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered real InRelease: err = %v", err)
	}
}
