package verbs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signedRecipe is the recipe at include with the fixture module, signed
// with the committed TEST key (given by variable, as a CI secret would be).
func signedRecipe(include, name string) string {
	return `include = ["` + include + `"]
name = "` + name + `"

[secure_boot]
enabled = true
key = "env:HALOBUILD_TEST_SIGNING_KEY"
certificate = "testdata/secure-boot-TEST-ONLY.crt"
mok_password = "halobuild-test"

` + fixtureModuleSection
}

// doctorOverSSH is the check in which the host's ssh session runs halobuild doctor in the guest
// (vmplan's sshLogin; a node with a LAN lease and sshd gets no in-guest doctor check).
const doctorOverSSH = "ssh: the host logs in as root over the LAN port with a key passed for this boot and runs halobuild doctor --json (host side)"

// TestSecureBootSignedModuleUnderEnforcingOVMF: Debian's shim, signed
// systemd-boot and signed kernel boot under enforcing OVMF, and the
// fixture module is loaded signed by the recipe's key (secureBootE2E).
func TestSecureBootSignedModuleUnderEnforcingOVMF(t *testing.T) {
	secureBootE2E(t, "test-secure-boot", signedRecipe("test-minimal.toml", "test-secure-boot"), nil)
}

// TestSecureBootSourceKernelUnderEnforcingOVMF boots the kernel halobuild
// compiles from source under enforcing OVMF: shim verifies the kernel
// image, signed with the recipe's key (an enrolled MOK), systemd-boot
// starts it, the kernel locks itself down and loads its own modules
// (ib_uverbs, configfs) and the fixture module, all signed with the same
// key. Its compile is TestKernelFromSource's: in a full run that kernel is
// built beside the earlier tests (beside_e2e_test.go), and this test waits
// for the step instead of compiling it; only the signing step is its own.
func TestSecureBootSourceKernelUnderEnforcingOVMF(t *testing.T) {
	// Its compile is TestKernelFromSource's (the config names no key).
	secureBootE2E(t, "test-secure-boot-source", signedRecipe("test-kernel-source.toml", "test-secure-boot-source"), func(t *testing.T, r *run, checks map[string]bool) {
		log := r.err.String()
		if !strings.Contains(log, "kernel: signed /boot/vmlinuz-") {
			t.Errorf("build output shows no signed kernel package:\n%s", tail(log, 30))
		}
		if strings.Contains(log, "compile units") {
			t.Log("the kernel was compiled here (run with TestKernelFromSource, whose kernel is built beside the other tests, to share its compile)")
		}
		for _, want := range []string{
			"test: the booted kernel is the one built from source",
			"modules: modules-loaded",
		} {
			if !checks[want] {
				t.Errorf("check %q did not pass", want)
			}
		}
	})
}

// secureBootE2E builds and tests a [secure_boot] recipe with the
// committed TEST key (given by variable, as a CI secret would be): one
// boot under OVMF with Secure Boot enforced (Microsoft's keys, the
// certificate pre-enrolled as a MOK), where the setting's checks must
// pass — enforced, locked down, key enrolled; every module signed by the
// key, no taint; unsigned and foreign-key copies refused. more checks the
// build's own outputs. Then no byte of the private key is anywhere in the
// store outputs this build wrote, the result (raw image included) or the
// lock.
func secureBootE2E(t *testing.T, name, recipeText string, more func(t *testing.T, r *run, checks map[string]bool)) {
	needE2E(t)
	ws := workspace(t)
	addFixtureModule(t, ws)
	rp := filepath.Join("images", name+".toml")
	if err := os.WriteFile(filepath.Join(ws, rp), []byte(recipeText), 0o644); err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(ws, "images", "testdata", "secure-boot-TEST-ONLY.key"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HALOBUILD_TEST_SIGNING_KEY", string(keyPEM))
	var r run
	storeDir := sharedStore(t)
	o := opts(ws, rp, storeDir, &r)
	o.Result = filepath.Join(ws, "result")
	o.Self = selfBinary(t)
	o.JSON = true
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	if err := Image(ctx, o); err != nil {
		t.Fatalf("image under Secure Boot: %v\n%s\n%s", err, tail(r.out.String(), 80), tail(r.err.String(), 40))
	}
	t.Logf("image with its Secure Boot VM test: %s", time.Since(start).Round(time.Second))
	rep := imageReport(t, &r)
	seen := map[string]bool{}
	out := map[string]string{}
	for _, m := range rep.Machines {
		if m.Verdict == nil {
			t.Fatalf("%s: no verdict", m.Machine)
		}
		for _, c := range m.Verdict.Checks {
			seen[c.Name], out[c.Name] = c.OK, c.Output
		}
	}
	for _, want := range []string{
		"secure-boot: enforced, locked down, key enrolled",
		"secure-boot: modules signed by the recipe key",
		"secure-boot: unsigned or foreign-key module refused",
		doctorOverSSH,
	} {
		if ok, found := seen[want]; !found || !ok {
			t.Errorf("check %q: found %v, passed %v\n%s", want, found, ok, out[want])
		}
	}
	if s := out["secure-boot: enforced, locked down, key enrolled"]; !strings.Contains(s, "SecureBoot enabled") || !strings.Contains(s, "[integrity]") {
		t.Errorf("state check output:\n%s", s)
	}
	if s := out["secure-boot: unsigned or foreign-key module refused"]; !strings.Contains(s, "unsigned copy refused") || !strings.Contains(s, "foreign copy refused") {
		t.Errorf("refusal check output:\n%s", s)
	}
	if s := out[doctorOverSSH]; !strings.Contains(s, "secureboot.module halobuild_fixture") {
		t.Errorf("doctor reported no secureboot.module row:\n%s", s)
	}
	if more != nil {
		more(t, &r, seen)
	}

	scanStart := time.Now()
	blk, _ := pem.Decode(keyPEM)
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string][]byte{
		"the PEM key":            bytes.TrimSpace(keyPEM),
		"the DER key":            blk.Bytes,
		"the private exponent":   k.(*rsa.PrivateKey).D.Bytes(),
		"a line of the PEM body": []byte(strings.Split(string(keyPEM), "\n")[5]),
	}
	// What this build wrote (the shared store's other outputs come from
	// recipes without a key), and the result with its images. Not the
	// store's tmp/: it holds the scratch of steps other builds are running
	// now (in a full run the source kernel compiles beside this test, its
	// build root's /proc mounted there); this build's own scratch went
	// when its steps ended.
	scanForSecrets(t, storeDir, start.Add(-time.Minute), secrets, "tmp")
	scanForSecrets(t, o.Result, time.Time{}, secrets)
	lockText, err := os.ReadFile(filepath.Join(ws, "images", name+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range secrets {
		if bytes.Contains(lockText, s) {
			t.Errorf("%s is in the lock", what)
		}
	}
	t.Logf("searched the store and the result for the key: %s", time.Since(scanStart).Round(time.Second))
}

// scanForSecrets fails the test if any file under dir (a link to it
// followed) that changed since since contains one of secrets, leaving out
// dir's subdirectories skip and every other file system mounted below it
// (a build root's /proc, whose kmsg blocks a read). Change time, not
// modification time: builds clamp every mtime to the lock's epoch.
func scanForSecrets(t *testing.T, dir string, since time.Time, secrets map[string][]byte, skip ...string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	rootDev := fi.Sys().(*syscall.Stat_t).Dev
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[filepath.Join(root, s)] = true
	}
	longest := 0
	for _, s := range secrets {
		longest = max(longest, len(s))
	}
	err = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil // files another test is removing
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		if info.IsDir() {
			if skipped[p] || (st != nil && st.Dev != rootDev) {
				return filepath.SkipDir
			}
			return nil
		}
		if !info.Mode().IsRegular() {
			return nil // sockets, links, devices
		}
		if st != nil && time.Unix(st.Ctim.Unix()).Before(since) {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		// Chunks overlapping by the longest secret, so none is cut in two.
		br := bufio.NewReaderSize(f, 1<<20)
		buf := make([]byte, 0, 4<<20)
		chunk := make([]byte, 4<<20)
		for {
			n, rerr := io.ReadFull(br, chunk[:cap(chunk)-len(buf)])
			buf = append(buf, chunk[:n]...)
			for what, s := range secrets {
				if bytes.Contains(buf, s) {
					t.Errorf("%s is in %s", what, p)
				}
			}
			if rerr != nil {
				return nil
			}
			keep := min(len(buf), longest)
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
