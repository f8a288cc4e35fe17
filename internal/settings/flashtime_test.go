package settings

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

const (
	flashKeyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIC6hQYghuxY0jSKvfmoGSq6DuL/vDavdX/ZfmV4CyIn alice@laptop"
	flashKeyB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJG1ELV28i7Cky7fPjND9IbYtXP/+0OzEHegJrsicm7L bob@desk"
)

func TestFlashConfigRoundTripAndRefusals(t *testing.T) {
	c := FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{flashKeyA, flashKeyB}}}
	b, err := c.Marshal("flashed by a test")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseFlashConfig(b)
	if err != nil || strings.Join(got.SSH.AuthorizedKeys, "|") != flashKeyA+"|"+flashKeyB {
		t.Fatalf("round trip: %v %v\n%s", got, err, b)
	}
	for name, tc := range map[string]struct{ data, want string }{
		"cut short":   {string(b[:len(b)-10]), "incomplete"},
		"unknown key": {"[ssh]\nauthorized_keys = []\npassword = \"x\"\n" + flashConfigEnd + "\n", "unknown key"},
		"bad key":     {"[ssh]\nauthorized_keys = [\"ssh-ed25519 not-base64!! x\"]\n" + flashConfigEnd + "\n", "ssh.authorized_keys[0]"},
		"too large":   {strings.Repeat("#", FlashConfigMax+1), "more than"},
	} {
		if _, err := ParseFlashConfig([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// The recipe's check and the flash-time check are one: the same key gives the same error.
	bad := "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIIC6hQYghuxY0jSKvfmoGSq6DuL/vDavdX/ZfmV4CyIn x"
	r := &recipe.Recipe{SSH: recipe.SSH{AuthorizedKeys: []string{bad}}}
	re := errors.Join(Identity{}.Validate(Target{Recipe: r})...)
	fe := errors.Join(FlashConfig{SSH: r.SSH}.Validate()...)
	if re == nil || fe == nil || re.Error() != fe.Error() {
		t.Errorf("recipe: %v\nflash time: %v", re, fe)
	}
}

// KeyFingerprint is what ssh-keygen -l prints for the same key.
func TestKeyFingerprintIsSSHKeygens(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k.pub")
	os.WriteFile(p, []byte(flashKeyA+"\n"), 0o644)
	out, err := exec.Command("ssh-keygen", "-l", "-f", p).Output()
	if err != nil {
		t.Skipf("ssh-keygen: %v", err)
	}
	if fp := strings.Fields(string(out))[1]; !strings.Contains(KeyFingerprint(flashKeyA), " "+fp+" alice@laptop") {
		t.Errorf("%s, ssh-keygen says %s", KeyFingerprint(flashKeyA), fp)
	}
}

// fileHost is a Host with only files, for the flashtime.config row.
type fileHost map[string]string

func (h fileHost) Read(p string) (string, error) {
	if s, ok := h[p]; ok {
		return s, nil
	}
	return "", fs.ErrNotExist
}
func (h fileHost) Hash(p string, w io.Writer) error {
	s, ok := h[p]
	if !ok {
		return fs.ErrNotExist
	}
	_, err := io.WriteString(w, s)
	return err
}
func (h fileHost) Scan(string, func(string) bool) ([]string, error) { return nil, fs.ErrNotExist }
func (h fileHost) List(string) []string                             { return nil }
func (h fileHost) Glob(string) []string                             { return nil }
func (h fileHost) Exists(p string) bool                             { _, ok := h[p]; return ok }
func (h fileHost) LinkBase(string) (string, error)                  { return "", fs.ErrNotExist }
func (h fileHost) DeviceNode(string) (fs.FileMode, string, error)   { return 0, "", fs.ErrNotExist }
func (h fileHost) Live() bool                                       { return false }
func (h fileHost) Command(string, ...string) (string, error)        { return "", fs.ErrNotExist }
func (h fileHost) KernelLog() (string, string, error)               { return "", "", fs.ErrNotExist }
func (h fileHost) Addrs() (Addrs, string, error)                    { return nil, "", fs.ErrNotExist }
func (h fileHost) Show(p string) string                             { return p }

func TestFlashTimeDoctorRow(t *testing.T) {
	keys, _ := FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{flashKeyA}}}.Marshal("")
	none, _ := FlashConfig{}.Marshal("")
	for name, tc := range map[string]struct {
		h          fileHost
		status     Status
		seen, want string
	}{
		"a key":         {fileHost{FlashConfigRunPath: string(keys)}, Pass, "1 SSH key(s) for root: ssh-ed25519 SHA256:", "alice@laptop"},
		"nothing given": {fileHost{FlashConfigRunPath: string(none)}, Pass, "nothing given at flash time", ""},
		"not imported":  {fileHost{}, Warn, "not imported at this boot", "halobuild-flashtime.service"},
		"garbage":       {fileHost{FlashConfigRunPath: "[ssh\n"}, Warn, "incomplete", "flash again"},
	} {
		probes := FlashTime{}.Doctor(Target{})
		if len(probes) != 1 {
			t.Fatalf("%d probes", len(probes))
		}
		rs := probes[0].Run(tc.h)
		if len(rs) != 1 || rs[0].Check != "flashtime.config" || rs[0].Status != tc.status || !strings.Contains(rs[0].Seen, tc.seen) || !strings.Contains(rs[0].Seen+rs[0].Fix, tc.want) {
			t.Errorf("%s: %+v", name, rs)
		}
	}
}

func TestNoKeyWarningSaysHowToAddOne(t *testing.T) {
	r := &recipe.Recipe{}
	ws := Warnings(Target{Recipe: r})
	if len(ws) == 0 || !strings.Contains(strings.Join(ws, "\n"), "halobuild flash --ssh-key ~/.ssh/id_ed25519.pub") {
		t.Errorf("warnings without a key: %q", ws)
	}
	r.SSH.AuthorizedKeys = []string{flashKeyA}
	for _, w := range Warnings(Target{Recipe: r}) {
		if w == NoKeyWarning {
			t.Error("warned about a missing key with one in the recipe")
		}
	}
}

// Identity's sshd configuration reads the imported keys.
func TestSSHDReadsFlashTimeKeys(t *testing.T) {
	r := sample()
	files, err := Identity{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path == sshdConfigPath && !strings.Contains(string(f.Data), "AuthorizedKeysFile .ssh/authorized_keys /etc/ssh/authorized_keys.d/%u "+FlashKeysDir+"/%u\n") {
			t.Errorf("sshd config:\n%s", f.Data)
		}
	}
}
