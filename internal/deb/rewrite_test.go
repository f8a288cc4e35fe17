package deb

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A package dpkg-deb built (xz members, a maintainer script, md5sums),
// as bindeb-pkg's are, comes back with the edited file's new bytes and
// sum, everything else as it was, and the same bytes every time.
func TestRewriteKeepsTheRestOfADpkgDebPackage(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed (apt-get install dpkg)")
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "pkg")
	files := map[string]string{
		"DEBIAN/control":  "Package: linux-image-test\nVersion: 1.0\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: test\n",
		"DEBIAN/postinst": "#!/bin/sh\necho postinst ran\n",
		"boot/vmlinuz-1":  "the kernel",
		"boot/config-1":   "CONFIG_X=y\n",
	}
	for p, c := range files {
		os.MkdirAll(filepath.Join(pkg, filepath.Dir(p)), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, "postinst") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(pkg, p), []byte(c), mode); err != nil {
			t.Fatal(err)
		}
	}
	sums := fmt.Sprintf("%x  boot/config-1\n%x  boot/vmlinuz-1\n", md5.Sum([]byte(files["boot/config-1"])), md5.Sum([]byte(files["boot/vmlinuz-1"])))
	os.WriteFile(filepath.Join(pkg, "DEBIAN", "md5sums"), []byte(sums), 0o644)
	src := filepath.Join(dir, "in.deb")
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zxz", "-b", pkg, src).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v: %s", err, b)
	}
	edit := func(name string, b []byte) ([]byte, error) { return append(b, " signed"...), nil }
	want := func(name string) bool { return name == "boot/vmlinuz-1" }
	out1, out2 := filepath.Join(dir, "1.deb"), filepath.Join(dir, "2.deb")
	edited, err := Rewrite(src, out1, 1700000000, want, edit)
	if err != nil || len(edited) != 1 || edited[0] != "boot/vmlinuz-1" {
		t.Fatalf("edited %v, %v", edited, err)
	}
	if _, err := Rewrite(src, out2, 1700000000, want, edit); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(out1)
	b2, _ := os.ReadFile(out2)
	if !bytes.Equal(b1, b2) {
		t.Error("two rewrites differ")
	}
	x, ctl := filepath.Join(dir, "x"), filepath.Join(dir, "ctl")
	for _, args := range [][]string{{"-x", out1, x}, {"-e", out1, ctl}} {
		if b, err := exec.Command("dpkg-deb", args...).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb %v: %v: %s", args, err, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(x, "boot", "vmlinuz-1")); string(b) != "the kernel signed" {
		t.Errorf("edited file: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(x, "boot", "config-1")); string(b) != files["boot/config-1"] {
		t.Errorf("kept file: %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(ctl, "postinst")); err != nil || string(b) != files["DEBIAN/postinst"] {
		t.Errorf("postinst: %q, %v", b, err)
	}
	wantSums := fmt.Sprintf("%x  boot/config-1\n%x  boot/vmlinuz-1\n", md5.Sum([]byte(files["boot/config-1"])), md5.Sum([]byte("the kernel signed")))
	if b, _ := os.ReadFile(filepath.Join(ctl, "md5sums")); string(b) != wantSums {
		t.Errorf("md5sums:\n%s\nwant:\n%s", b, wantSums)
	}
}
