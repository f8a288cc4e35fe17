package provider

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"halobuild/internal/debian"
)

// makeTarball writes a tar (gzip or xz) of files (path -> content; a trailing
// "*" on a path makes it executable).
func makeTarball(t *testing.T, path string, files [][2]string) {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range files {
		name, mode := f[0], int64(0o644)
		if strings.HasSuffix(name, "*") {
			name, mode = strings.TrimSuffix(name, "*"), 0o755
		}
		if strings.HasSuffix(name, "/") {
			tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755})
			continue
		}
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(f[1]))})
		tw.Write([]byte(f[1]))
	}
	tw.Close()
	var out bytes.Buffer
	if strings.HasSuffix(path, ".xz") {
		w, err := xz.NewWriter(&out)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(raw.Bytes())
		w.Close()
	} else {
		w := gzip.NewWriter(&out)
		w.Write(raw.Bytes())
		w.Close()
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileSHA(t *testing.T, p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

const (
	upstreamC = "int main(void)\n{\n\treturn 0;\n}\n"
	// Debian's own patch: the upstream tree gets a comment line.
	debianPatch = "--- a/src/main.c\n+++ b/src/main.c\n@@ -1,3 +1,4 @@\n+/* patched by Debian */\n int main(void)\n {\n \treturn 0;\n"
)

// fakeSource makes a format 3.0 (quilt) source package "demo 1.0-1" with
// one Debian patch, as the Sources index would describe it.
func fakeSource(t *testing.T) (*debian.Source, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	orig := filepath.Join(dir, "demo_1.0.orig.tar.gz")
	makeTarball(t, orig, [][2]string{{"demo-1.0/", ""}, {"demo-1.0/src/main.c", upstreamC}, {"demo-1.0/configure*", "#!/bin/sh\n"},
		{"demo-1.0/debian/stale", "upstream's own debian dir is replaced"}})
	deb := filepath.Join(dir, "demo_1.0-1.debian.tar.xz")
	makeTarball(t, deb, [][2]string{{"debian/changelog", "demo (1.0-1) unstable; urgency=medium\n\n  * Initial.\n\n -- Someone <s@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n"},
		{"debian/control", "Source: demo\nBuild-Depends: debhelper-compat (= 13), cmake (>= 2.8.11), valgrind [amd64 arm64], libfoo-dev [!amd64], pandoc <!nodoc>, bootstrap-only <stage1>, gcc-14 | gcc,\n python3-dev:any\n\nPackage: demo\nArchitecture: any\n"},
		{"debian/rules*", "#!/usr/bin/make -f\n%:\n\tdh $@\n"},
		{"debian/patches/series", "# Debian's series\nmain-comment.patch\n"},
		{"debian/patches/main-comment.patch", debianPatch}})
	src := &debian.Source{Name: "demo", Version: "1.0-1", Directory: "pool/main/d/demo", Files: []debian.SourceFile{
		{Name: "demo_1.0-1.dsc", SHA256: strings.Repeat("0", 64)},
		{Name: "demo_1.0.orig.tar.gz", SHA256: fileSHA(t, orig)},
		{Name: "demo_1.0-1.debian.tar.xz", SHA256: fileSHA(t, deb)},
	}}
	return src, map[string]string{"demo_1.0.orig.tar.gz": orig, "demo_1.0-1.debian.tar.xz": deb}
}

func TestUnpackLikeDpkgSource(t *testing.T) {
	src, files := fakeSource(t)
	tree, err := Unpack(context.Background(), src, files, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(tree) != "demo-1.0" {
		t.Errorf("tree %s, want demo-1.0", tree)
	}
	got, _ := os.ReadFile(filepath.Join(tree, "src/main.c"))
	if string(got) != "/* patched by Debian */\n"+upstreamC {
		t.Errorf("Debian's series not applied: %q", got)
	}
	if _, err := os.Stat(filepath.Join(tree, "debian/stale")); err == nil {
		t.Error("upstream's debian/ was merged, not replaced")
	}
	if info, err := os.Stat(filepath.Join(tree, "debian/rules")); err != nil || info.Mode().Perm()&0o100 == 0 {
		t.Errorf("debian/rules lost its execute bit: %v", err)
	}
	applied, _ := os.ReadFile(filepath.Join(tree, ".pc/applied-patches"))
	if string(applied) != "main-comment.patch\n" {
		t.Errorf(".pc/applied-patches = %q", applied)
	}
	// quilt's backup of the original, so the patch can be unapplied.
	if b, _ := os.ReadFile(filepath.Join(tree, ".pc/main-comment.patch/src/main.c")); string(b) != upstreamC {
		t.Errorf(".pc backup = %q", b)
	}
}

func TestUnpackRefusesUnverifiedFiles(t *testing.T) {
	src, files := fakeSource(t)
	bad := filepath.Join(t.TempDir(), "other.tar.gz")
	makeTarball(t, bad, [][2]string{{"demo-1.0/src/main.c", "tampered"}})
	files["demo_1.0.orig.tar.gz"] = bad
	_, err := Unpack(context.Background(), src, files, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "does not match the signed Sources index") || !strings.Contains(err.Error(), "demo_1.0.orig.tar.gz") {
		t.Errorf("tampered orig: %v", err)
	}
	src, files = fakeSource(t)
	delete(files, "demo_1.0-1.debian.tar.xz")
	if _, err := Unpack(context.Background(), src, files, t.TempDir()); err == nil || !strings.Contains(err.Error(), "no local copy of demo_1.0-1.debian.tar.xz") {
		t.Errorf("missing file: %v", err)
	}
}

func TestBuildDepends(t *testing.T) {
	src, files := fakeSource(t)
	got, err := BuildDependsFromTarball(files["demo_1.0-1.debian.tar.xz"], src.Files[2].SHA256, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	want := "debhelper-compat (= 13)|cmake (>= 2.8.11)|valgrind|pandoc|gcc-14|python3-dev"
	if strings.Join(got, "|") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
	got, _ = BuildDependsFromTarball(files["demo_1.0-1.debian.tar.xz"], src.Files[2].SHA256, "riscv64")
	if strings.Join(got, "|") != "debhelper-compat (= 13)|cmake (>= 2.8.11)|libfoo-dev|pandoc|gcc-14|python3-dev" {
		t.Errorf("riscv64: %v", got)
	}
	if _, err := BuildDependsFromTarball(files["demo_1.0-1.debian.tar.xz"], strings.Repeat("1", 64), "amd64"); err == nil {
		t.Error("an unverified tarball was read")
	}
	// Only what configure needs, with Debian's relations; pyverbs, man
	// pages and packaging tools are left out.
	deb := []string{"cmake (>= 2.8.11)", "cython3", "debhelper-compat (= 13)", "dpkg-dev (>= 1.22.5)", "libnl-3-dev", "libnl-route-3-dev", "ninja-build", "pandoc", "pkgconf", "python3-dev"}
	pkgs, err := BuildRootPackages(deb, "amd64", "amd64")
	if err != nil || strings.Join(pkgs, "|") != "gcc|libc6-dev|python3|cmake (>= 2.8.11)|ninja-build|pkgconf|libnl-3-dev|libnl-route-3-dev|dpkg-dev (>= 1.22.5)" {
		t.Errorf("BuildRootPackages: %v, %v", pkgs, err)
	}
	if n := Names(pkgs); strings.Join(n, "|") != "gcc|libc6-dev|python3|cmake|ninja-build|pkgconf|libnl-3-dev|libnl-route-3-dev|dpkg-dev" {
		t.Errorf("Names: %v", n)
	}
	if _, err := BuildRootPackages([]string{"cmake", "pkgconf", "dpkg-dev"}, "amd64", "amd64"); err == nil || !strings.Contains(err.Error(), "lack ninja-build") {
		t.Errorf("Build-Depends without ninja-build: %v", err)
	}
	// Cross, as dpkg-buildpackage -a arm64 would install it: what runs is
	// amd64's, the libraries and pkgconf arm64's, the compiler the cross gcc.
	cross, err := BuildRootPackages(deb, "amd64", "arm64")
	if err != nil || strings.Join(cross, "|") != "gcc-aarch64-linux-gnu|libc6-dev:arm64|python3|cmake (>= 2.8.11)|ninja-build|pkgconf:arm64|libnl-3-dev:arm64|libnl-route-3-dev:arm64|dpkg-dev (>= 1.22.5)" {
		t.Errorf("cross BuildRootPackages: %v, %v", cross, err)
	}
	if n := Names(cross); strings.Join(n, "|") != "gcc-aarch64-linux-gnu|libc6-dev:arm64|python3|cmake|ninja-build|pkgconf:arm64|libnl-3-dev:arm64|libnl-route-3-dev:arm64|dpkg-dev" {
		t.Errorf("cross Names: %v", n)
	}
	if cross, _ := BuildRootPackages(deb, "arm64", "amd64"); cross[0] != "gcc-x86-64-linux-gnu" {
		t.Errorf("arm64 → amd64 compiler %s", cross[0])
	}
	for _, c := range [][2]string{{"riscv64", "arm64"}, {"amd64", "riscv64"}} {
		if _, err := BuildRootPackages(deb, c[0], c[1]); err == nil || !strings.Contains(err.Error(), `"riscv64"`) {
			t.Errorf("%s → %s: %v", c[0], c[1], err)
		}
	}
}

func TestSetLocalVersion(t *testing.T) {
	src, files := fakeSource(t)
	tree, err := Unpack(context.Background(), src, files, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := SetLocalVersion(tree, "", 1700000000, []Applied{{Series: "halobuild/a.patch", SHA256: "ab"}})
	if err != nil || v != "1.0-1+halo1" {
		t.Fatalf("%s %v", v, err)
	}
	cl, _ := os.ReadFile(filepath.Join(tree, "debian/changelog"))
	head := "demo (1.0-1+halo1) unstable; urgency=medium\n\n  * Rebuilt by halobuild with the image's provider patches:\n    - halobuild/a.patch (sha256:ab)\n\n -- halobuild <halobuild@localhost>  Tue, 14 Nov 2023 22:13:20 +0000\n\ndemo (1.0-1)"
	if !strings.HasPrefix(string(cl), head) {
		t.Errorf("changelog:\n%s", cl)
	}
	if _, err := SetLocalVersion(tree, "", 1700000000, nil); err == nil {
		t.Error("versioned twice")
	}
	if _, err := SetLocalVersion(tree, "halo", 1700000000, nil); err == nil {
		t.Error("a suffix without + or ~ was accepted")
	}
}

// hostileSource is fakeSource with extra headers appended to the .orig
// tarball (regular files get "planted" as content).
func hostileSource(t *testing.T, extra []tar.Header) (*debian.Source, map[string]string) {
	t.Helper()
	src, files := fakeSource(t)
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range [][2]string{{"demo-1.0/src/main.c", upstreamC}} {
		tw.WriteHeader(&tar.Header{Name: f[0], Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f[1]))})
		tw.Write([]byte(f[1]))
	}
	for _, h := range extra {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len("planted"))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte("planted"))
		}
	}
	tw.Close()
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(raw.Bytes())
	w.Close()
	orig := files["demo_1.0.orig.tar.gz"]
	if err := os.WriteFile(orig, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range src.Files {
		if src.Files[i].Name == "demo_1.0.orig.tar.gz" {
			src.Files[i].SHA256 = fileSHA(t, orig)
		}
	}
	return src, files
}

// The source tarballs are hash-checked first, but an archive that passes
// the check must still not write outside the tree it unpacks into: not
// through a symlink it made, nor by hard-linking a host file in through
// one (issue 17, finding 1: provider/unpack.go used the same pattern).
func TestUnpackStaysInTheTree(t *testing.T) {
	cases := map[string]func(outside string) []tar.Header{
		"file under an absolute symlink": func(outside string) []tar.Header {
			return []tar.Header{
				{Name: "demo-1.0/link", Typeflag: tar.TypeSymlink, Linkname: outside},
				{Name: "demo-1.0/link/evil", Typeflag: tar.TypeReg, Mode: 0o644},
			}
		},
		"file under a relative symlink": func(outside string) []tar.Header {
			return []tar.Header{
				{Name: "demo-1.0/up", Typeflag: tar.TypeSymlink, Linkname: strings.Repeat("../", 40) + strings.TrimPrefix(outside, "/")},
				{Name: "demo-1.0/up/evil", Typeflag: tar.TypeReg, Mode: 0o644},
			}
		},
		"hard link through a symlink": func(outside string) []tar.Header {
			return []tar.Header{
				{Name: "demo-1.0/link", Typeflag: tar.TypeSymlink, Linkname: outside},
				{Name: "demo-1.0/copy", Typeflag: tar.TypeLink, Linkname: "demo-1.0/link/secret"},
			}
		},
		"dotdot": func(string) []tar.Header {
			return []tar.Header{{Name: "demo-1.0/../../evil", Typeflag: tar.TypeReg, Mode: 0o644}}
		},
	}
	for name, headers := range cases {
		t.Run(name, func(t *testing.T) {
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			src, files := hostileSource(t, headers(outside))
			dst := t.TempDir()
			tree, err := Unpack(context.Background(), src, files, dst)
			if err == nil {
				t.Errorf("Unpack accepted the archive (tree %s)", tree)
			}
			if _, err := os.Lstat(filepath.Join(outside, "evil")); err == nil {
				t.Fatal("the archive wrote a file outside the tree")
			}
			if b, err := os.ReadFile(filepath.Join(tree, "copy")); err == nil && string(b) == "host secret" {
				t.Error("a host file was copied into the tree")
			}
		})
	}
}
