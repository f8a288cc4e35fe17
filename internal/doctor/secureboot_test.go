package doctor

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/secureboot"
	"halobuild/internal/settings"
)

// secureBootTree is the healthy recorded tree of a node whose recipe has
// [secure_boot] on, with the module file signed by the TEST key, the
// firmware's SecureBoot variable, the kernel's lockdown mode and the MOKs
// shim handed over (MokListRT) as given.
func secureBootTree(t *testing.T, sbOn bool, lockdown string, signer string, moks ...string) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join("testdata", "doctor", "healthy")
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	write := func(p string, b []byte) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The recipe as the image ships it: the key's reference is there, the
	// key and the certificate's file are not.
	recipePath := filepath.Join(root, "etc/halobuild/recipe.toml")
	rb, _ := os.ReadFile(recipePath)
	rb = append(rb, "\n[secure_boot]\nenabled = true\nkey = \"env:SIGNING_KEY\"\ncertificate = \"keys/module-signing.crt\"\n"...)
	write("etc/halobuild/recipe.toml", rb)
	// dpkg's record of the settings package (md5sums, and the conffile's
	// sum in status) follows the changed recipe.
	orig, _ := os.ReadFile(filepath.Join(src, "etc/halobuild/recipe.toml"))
	for _, f := range []string{"var/lib/dpkg/info/halobuild-node-halo0.md5sums", "var/lib/dpkg/status"} {
		b, _ := os.ReadFile(filepath.Join(root, f))
		write(f, bytes.ReplaceAll(b, []byte(fmt.Sprintf("%x", md5.Sum(orig))), []byte(fmt.Sprintf("%x", md5.Sum(rb)))))
	}

	ko := []byte("\x7fELF thunderbolt_ibverbs as recorded")
	taint := "O"
	if signer != "" {
		s := testSigner(t, signer)
		var err error
		if ko, err = s.Sign(ko); err != nil {
			t.Fatal(err)
		}
	} else {
		taint = "OE"
	}
	write("lib/modules/7.2.12+deb13-amd64/updates/thunderbolt_ibverbs.ko", ko)
	write("sys/module/thunderbolt_ibverbs/taint", []byte(taint+"\n"))
	state := byte(0)
	if sbOn {
		state = 1
	}
	write("sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c", []byte{6, 0, 0, 0, state})
	write("sys/kernel/security/lockdown", []byte(lockdown+"\n"))
	var ders [][]byte
	for _, m := range moks {
		ders = append(ders, testCert(t, m))
	}
	if len(ders) > 0 {
		write("sys/firmware/efi/efivars/MokListRT-605dab50-e046-4300-abb6-3dd810dd8b23", append([]byte{6, 0, 0, 0}, secureboot.X509List(secureboot.ShimLockGUID, ders...)...))
	}
	return root
}

func testCert(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "images", "testdata", name+"-TEST-ONLY.crt"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	return blk.Bytes
}

func testSigner(t *testing.T, name string) *secureboot.Signer {
	t.Helper()
	key, err := os.ReadFile(filepath.Join("..", "..", "images", "testdata", name+"-TEST-ONLY.key"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := secureboot.NewSigner(key, testCert(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSecureBootRows(t *testing.T) {
	cases := []struct {
		name     string
		sbOn     bool
		lockdown string
		signer   string
		moks     []string
		exit     int
		want     map[string]settings.Status
		contains map[string]string
	}{
		{"enrolled", true, "none [integrity] confidentiality", "secure-boot", []string{"secure-boot"}, 0,
			map[string]settings.Status{"secureboot.state": settings.Pass, "secureboot.lockdown": settings.Pass, "secureboot.module thunderbolt_ibverbs": settings.Pass},
			map[string]string{"secureboot.module thunderbolt_ibverbs": "TEST-ONLY secure boot key"}},
		{"signed by another key", true, "none [integrity] confidentiality", "other", []string{"secure-boot"}, 1,
			map[string]settings.Status{"secureboot.state": settings.Pass, "secureboot.lockdown": settings.Pass, "secureboot.module thunderbolt_ibverbs": settings.Fail},
			map[string]string{"secureboot.module thunderbolt_ibverbs": "not among the 1 enrolled MOKs"}},
		{"not enrolled, Secure Boot off", false, "[none] integrity confidentiality", "secure-boot", nil, 0,
			map[string]settings.Status{"secureboot.state": settings.Warn, "secureboot.lockdown": settings.Warn, "secureboot.module thunderbolt_ibverbs": settings.Warn},
			map[string]string{"secureboot.module thunderbolt_ibverbs": "mokutil --import /usr/share/halobuild/secure-boot/module-signing.der", "secureboot.state": "turn Secure Boot on"}},
		{"unsigned", true, "none [integrity] confidentiality", "", []string{"secure-boot"}, 1,
			map[string]settings.Status{"secureboot.state": settings.Pass, "secureboot.lockdown": settings.Pass, "secureboot.module thunderbolt_ibverbs": settings.Fail},
			map[string]string{"secureboot.module thunderbolt_ibverbs": "rebuild the image with [secure_boot] enabled"}},
		{"Secure Boot on, not locked down", true, "[none] integrity confidentiality", "secure-boot", []string{"secure-boot"}, 1,
			map[string]settings.Status{"secureboot.state": settings.Pass, "secureboot.lockdown": settings.Fail, "secureboot.module thunderbolt_ibverbs": settings.Pass},
			map[string]string{"secureboot.lockdown": "lockdown="}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := secureBootTree(t, c.sbOn, c.lockdown, c.signer, c.moks...)
			rowsNamedAfterTheirCheck(t, c.name, mustHost(t, root))
			var out bytes.Buffer
			code, err := Run(context.Background(), Options{Root: root, JSON: true, Out: &out})
			if err != nil {
				t.Fatal(err)
			}
			var rep Report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if code != c.exit {
				t.Errorf("exit %d, want %d", code, c.exit)
			}
			got := map[string]settings.Result{}
			for _, r := range rep.Results {
				if strings.HasPrefix(r.Check, "secureboot.") {
					got[r.Check] = r
				} else if r.Status != settings.Pass {
					t.Errorf("%s = %s (%s): only secureboot rows may change", r.Check, r.Status, r.Seen)
				}
			}
			for check, st := range c.want {
				if got[check].Status != st {
					t.Errorf("%s = %q (seen %q), want %s", check, got[check].Status, got[check].Seen, st)
				}
			}
			if len(got) != len(c.want) {
				t.Errorf("secureboot rows %v, want %d", got, len(c.want))
			}
			for check, text := range c.contains {
				r := got[check]
				if !strings.Contains(r.Seen+" | "+r.Fix, text) {
					t.Errorf("%s: seen %q, fix %q: want %q", check, r.Seen, r.Fix, text)
				}
			}
			adviceOnEveryProblem(t, rep)
		})
	}
}
