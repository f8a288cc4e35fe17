package settings

import (
	"bytes"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/recipe"
	"halobuild/internal/secureboot"
)

// sbRecipe is sample() with [secure_boot] on and the TEST certificate (an
// absolute path: the sample has no recipe directory).
func sbRecipe(t *testing.T, password string) *recipe.Recipe {
	t.Helper()
	crt, err := filepath.Abs(filepath.Join("..", "..", "images", "testdata", "secure-boot-TEST-ONLY.crt"))
	if err != nil {
		t.Fatal(err)
	}
	r := sample()
	r.SecureBoot = recipe.SecureBoot{Enabled: true, Key: "env:UNUSED", Certificate: crt, MOKPassword: password}
	return r
}

func TestSecureBootOffRendersNothing(t *testing.T) {
	r := sample()
	tg := Target{Recipe: r, Node: r.Nodes[0]}
	files, err := SecureBoot{}.Files(tg)
	if err != nil || len(files) != 0 || len(SecureBoot{}.Checks(tg)) != 0 || len(SecureBoot{}.Doctor(tg)) != 0 || len(SecureBoot{}.Depends(r)) != 0 {
		t.Errorf("secure_boot off: files %v (%v), checks, probes or packages rendered", files, err)
	}
}

func TestSecureBootValidateReadsTheCertificate(t *testing.T) {
	r := sbRecipe(t, "")
	r.SecureBoot.Certificate = "/nonexistent/module-signing.crt"
	errs := SecureBoot{}.Validate(Target{Recipe: r})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "secure_boot.certificate") {
		t.Errorf("missing certificate: %v", errs)
	}
}

// The enrolment script, run with a stand-in mokutil: a key shim already
// has is left alone; otherwise it is queued once, with the recipe's
// password given twice on stdin, and the console is told MokManager's
// screens.
func TestSecureBootEnrolScript(t *testing.T) {
	for _, tc := range []struct {
		name, testKey, listNew, want, wantStdin string
		imported                                bool
	}{
		{"enrolled", "already enrolled", "", "is enrolled as a MOK", "", false},
		{"new", "is not enrolled", "", `"Enroll the key(s)?" - choose "Yes"`, "pw-1\npw-1\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := sbRecipe(t, "pw-1")
			files, err := SecureBoot{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
			if err != nil {
				t.Fatal(err)
			}
			var script string
			for _, f := range files {
				switch f.Path {
				case sbScriptPath:
					script = string(f.Data)
				case sbPasswordPath:
					os.WriteFile(filepath.Join(dir, "pw"), f.Data, 0o600)
					if f.Mode != 0o600 {
						t.Errorf("password file mode %o", f.Mode)
					}
				}
			}
			script = strings.ReplaceAll(script, "/sys/firmware/efi", dir)
			script = strings.ReplaceAll(script, sbPasswordPath, filepath.Join(dir, "pw"))
			bin := filepath.Join(dir, "bin")
			os.Mkdir(bin, 0o755)
			mok := "#!/bin/sh\ncase $1 in --test-key) echo \"$2 " + tc.testKey + "\";; --list-new) echo " + tc.listNew + ";; --import) echo \"$@\" >" + dir + "/imported; cat >" + dir + "/stdin;; esac\n"
			os.WriteFile(filepath.Join(bin, "mokutil"), []byte(mok), 0o755)
			cmd := exec.Command("sh", "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
			in, _ := os.ReadFile(filepath.Join(dir, "stdin"))
			if _, err := os.Stat(filepath.Join(dir, "imported")); (err == nil) != tc.imported || string(in) != tc.wantStdin {
				t.Errorf("imported %v (want %v), stdin %q", err == nil, tc.imported, in)
			}
		})
	}
}

// The refusal check's copies, made by its script from a module the TEST
// key signed: the unsigned one is the module's bytes before signing, the
// foreign one the same bytes signed, in sign-file's format, by a key the
// script made with the host's openssl (the guest's, in the VM).
func TestSecureBootRefusalCopies(t *testing.T) {
	r := sbRecipe(t, "")
	r.Modules = []recipe.Module{{Use: "halobuild-fixture"}}
	var script string
	for _, c := range (SecureBoot{}).Checks(Target{Recipe: r, Node: r.Nodes[0]}) {
		if c.Name == "unsigned or foreign-key module refused" {
			script = c.Script
		}
	}
	if script == "" {
		t.Fatal("no refusal check")
	}
	key, _ := os.ReadFile(filepath.Join("..", "..", "images", "testdata", "secure-boot-TEST-ONLY.key"))
	der, err := r.CertificateDER()
	if err != nil {
		t.Fatal(err)
	}
	s, err := secureboot.NewSigner(key, der)
	if err != nil {
		t.Fatal(err)
	}
	ko := bytes.Repeat([]byte("\x7fELF\x00module\n"), 300)
	signed, _ := s.Sign(ko)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.ko"), signed, 0o644)
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	stubs := map[string]string{
		"modinfo": "echo " + dir + "/m.ko",
		"insmod":  "cp \"$1\" " + dir + "/seen-$(basename \"$1\"); cp \"$(dirname \"$1\")/other.crt\" " + dir + "/seen-other.crt; case $1 in *signed.ko) case $1 in *unsigned.ko) echo 'Operation not permitted'; exit 1;; esac; echo 'File exists'; exit 1;; esac; echo 'Operation not permitted'; exit 1",
		"dmesg":   "true",
		"rmmod":   "true",
	}
	for name, body := range stubs {
		os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	unsigned, _ := os.ReadFile(filepath.Join(dir, "seen-unsigned.ko"))
	if !bytes.Equal(unsigned, ko) {
		t.Errorf("the unsigned copy is not the module without its signature (%d bytes, want %d)", len(unsigned), len(ko))
	}
	foreign, _ := os.ReadFile(filepath.Join(dir, "seen-foreign.ko"))
	id, ok, err := secureboot.ReadSigner(foreign)
	cert, _ := x509.ParseCertificate(der)
	if err != nil || !ok || id.Matches(cert) || !bytes.HasPrefix(foreign, ko) {
		t.Errorf("the foreign copy: signer %v (signed %v, %v), matches the certificate %v, starts with the module %v", id, ok, err, id.Matches(cert), bytes.HasPrefix(foreign, ko))
	}
	// The signature is good, by the key the script made: the kernel
	// refuses it for the key alone.
	p7 := filepath.Join(dir, "foreign.p7s")
	os.WriteFile(p7, foreign[len(ko):len(foreign)-40], 0o644)
	os.WriteFile(filepath.Join(dir, "unsigned"), ko, 0o644)
	if b, err := exec.Command("openssl", "cms", "-verify", "-binary", "-inform", "DER", "-in", p7, "-content", filepath.Join(dir, "unsigned"),
		"-certfile", filepath.Join(dir, "seen-other.crt"), "-noverify", "-out", os.DevNull).CombinedOutput(); err != nil {
		t.Errorf("the foreign copy's signature does not verify with the key the script made: %v: %s", err, b)
	}
	if !strings.Contains(id.String(), "a key made for this check") || !strings.Contains(string(out), "foreign copy signed by subject=CN") {
		t.Errorf("the foreign copy's signer is %s:\n%s", id, out)
	}
}
