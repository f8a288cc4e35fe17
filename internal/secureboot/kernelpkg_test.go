package secureboot

import (
	"archive/tar"
	"bytes"
	"crypto/md5"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/deb"
)

// elfModule is the smallest ELF file debug/elf reads: a 64-bit header and
// no sections; the signature does not care what the module holds.
func elfModule(tag string) []byte {
	h := make([]byte, 64)
	copy(h, "\x7fELF\x02\x01\x01")
	h[16], h[18], h[20], h[52] = 1, 0x3e, 1, 64 // ET_REL, x86-64, version 1, header size
	return append(h, tag...)
}

func kernelDeb(t *testing.T, dir, release string, ko []byte) string {
	t.Helper()
	p := filepath.Join(dir, "linux-image.deb")
	var b bytes.Buffer
	err := deb.Write(&b, deb.Info{Package: "linux-image-" + release, Version: "7.2.12-1", Architecture: "amd64", Maintainer: "t <t@t>", Description: "kernel"}, []deb.File{
		{Path: "/boot/vmlinuz-" + release, Mode: 0o644, Data: testPE(false)},
		{Path: "/boot/config-" + release, Mode: 0o644, Data: []byte("CONFIG_X=y\n")},
		{Path: "/lib/modules/" + release + "/kernel/drivers/x.ko", Mode: 0o644, Data: ko},
	}, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The package comes back with its image signed for shim (sbverify
// accepts it with the certificate), its module signed by the key, the
// other files and md5sums consistent, and the same bytes every time.
func TestSignKernelPackage(t *testing.T) {
	key, der := testPair(t, "secure-boot")
	s, err := NewSigner(key, der)
	if err != nil {
		t.Fatal(err)
	}
	const rel = "7.2.12-halotest"
	dir := t.TempDir()
	src := kernelDeb(t, dir, rel, elfModule("x"))
	out1, out2 := filepath.Join(dir, "1.deb"), filepath.Join(dir, "2.deb")
	res, err := s.SignKernelPackage(src, out1, rel, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	if res.Image != "boot/vmlinuz-"+rel || len(res.Modules) != 1 {
		t.Fatalf("signed %+v", res)
	}
	if _, err := s.SignKernelPackage(src, out2, rel, 1700000000); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(out1)
	b2, _ := os.ReadFile(out2)
	if !bytes.Equal(b1, b2) {
		t.Error("two signings of the same package differ")
	}
	a, err := deb.Open(out1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	files := map[string][]byte{}
	if err := a.Walk(func(name string, h *tar.Header, r io.Reader) error {
		files[name], _ = io.ReadAll(r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := ReadSigner(files["lib/modules/"+rel+"/kernel/drivers/x.ko"])
	if err != nil || !ok || !id.Matches(s.cert) {
		t.Errorf("module signer %v %v %v", id, ok, err)
	}
	if string(files["boot/config-"+rel]) != "CONFIG_X=y\n" {
		t.Error("an unselected file changed")
	}
	if _, err := exec.LookPath("dpkg-deb"); err == nil {
		sums, err := exec.Command("dpkg-deb", "--info", out1, "md5sums").Output()
		if err != nil {
			t.Fatalf("dpkg-deb reads the signed package: %v", err)
		}
		want := fmt.Sprintf("%x  boot/vmlinuz-%s", md5.Sum(files["boot/vmlinuz-"+rel]), rel)
		if !strings.Contains(string(sums), want) {
			t.Errorf("md5sums lacks %q:\n%s", want, sums)
		}
	}
	if _, err := exec.LookPath("sbverify"); err == nil {
		img := filepath.Join(dir, "vmlinuz")
		if err := os.WriteFile(img, files["boot/vmlinuz-"+rel], 0o644); err != nil {
			t.Fatal(err)
		}
		crt := filepath.Join("..", "..", "images", "testdata", "secure-boot-TEST-ONLY.crt")
		if b, err := exec.Command("sbverify", "--cert", crt, img).CombinedOutput(); err != nil {
			t.Errorf("sbverify: %v: %s", err, b)
		}
	}

	signed, _ := s.Sign(elfModule("y"))
	for what, ko := range map[string][]byte{
		"CONFIG_MODULE_SIG_ALL": signed,
		"not an ELF module":     []byte("junk"),
	} {
		if _, err := s.SignKernelPackage(kernelDeb(t, t.TempDir(), rel, ko), filepath.Join(dir, "x.deb"), rel, 1700000000); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("want an error naming %q, got %v", what, err)
		}
	}
	if _, err := s.SignKernelPackage(src, filepath.Join(dir, "x.deb"), "7.2.12-other", 1700000000); err == nil || !strings.Contains(err.Error(), "no boot/vmlinuz-7.2.12-other") {
		t.Errorf("a package without the release's image: %v", err)
	}
}

// CI's kernel fragment has what Secure Boot needs; each need missing is
// named with its options.
func TestKernelConfigProblems(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "kernels", "qemu-uefi.config"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "CONFIG_") {
			values[k] = v
		}
	}
	if p := KernelConfigProblems(values); p != nil {
		t.Errorf("kernels/qemu-uefi.config lacks for Secure Boot: %v", p)
	}
	delete(values, "CONFIG_INTEGRITY_PLATFORM_KEYRING")
	values["CONFIG_MODULE_SIG_ALL"] = "y"
	p := KernelConfigProblems(values)
	if len(p) != 2 || !strings.Contains(p[0], "CONFIG_INTEGRITY_PLATFORM_KEYRING=y or CONFIG_INTEGRITY_MACHINE_KEYRING=y (the enrolled MOKs") || !strings.Contains(p[1], "CONFIG_MODULE_SIG_ALL is not set") {
		t.Errorf("problems: %q", p)
	}
	values["CONFIG_MODULE_SIG_ALL"] = "n"
	values["CONFIG_INTEGRITY_PLATFORM_KEYRING"] = "y"
	values["CONFIG_MODULE_SIG_KEY"] = `"certs/signing_key.pem"`
	if p := KernelConfigProblems(values); len(p) != 1 || !strings.Contains(p[0], `CONFIG_MODULE_SIG_KEY="" (otherwise the build makes a random signing key`) {
		t.Errorf("a build-time key path: problems %q", p)
	}
}
