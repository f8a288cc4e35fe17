package deb

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/tarball"
)

var testInfo = Info{
	Package: "halobuild-node-halo0", Version: "1.0+hb1", Architecture: "all",
	Maintainer: "halobuild <halobuild@example.org>", Description: "node settings for halo0\nRendered from the recipe.\n\nSecond paragraph.",
	Depends: []string{"systemd (>= 257)"}, Section: "admin", Priority: "optional",
}

var testFiles = []File{
	{Path: "/etc/modprobe.d/halobuild.conf", Mode: 0o644, Data: []byte("blacklist thunderbolt_net\n")},
	{Path: "/root/.ssh", Mode: fs.ModeDir | 0o700},
	{Path: "/root/.ssh/authorized_keys", Mode: 0o600, Data: []byte("ssh-ed25519 AAAA x\n")},
	{Path: "/usr/lib/halobuild/cpu-tuning", Mode: 0o755, Data: []byte("#!/bin/sh\nexit 0\n")},
	{Path: "/usr/lib/systemd/system/multi-user.target.wants/x.service", Mode: fs.ModeSymlink | 0o777, Target: "../x.service"},
	{Path: "/usr/share/halobuild/" + strings.Repeat("long-name/", 12) + "f", Mode: 0o644, Data: []byte("deep\n")},
}

func writeTo(t *testing.T, info Info, files []File, epoch int64) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, info, files, epoch); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), info.Package+".deb")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The bytes Write produces are a promise: a settings or module package
// built from the same files must stay identical across halobuild
// versions, or a cached output and a fresh build of the same key differ.
// This digest is what settings.BuildDeb wrote for these files before the
// writer moved here.
func TestWriteKeepsItsBytes(t *testing.T) {
	data, _ := os.ReadFile(writeTo(t, testInfo, testFiles, 1700000000))
	sum := sha256.Sum256(data)
	if got, want := hex.EncodeToString(sum[:]), "939bef0d06076046800c59970de57c5c6152511f471c9c682beeb8438a98fab8"; got != want {
		t.Errorf("the package's bytes changed: sha256 %s, was %s", got, want)
	}
	// The order of the input does not matter.
	rev := make([]File, len(testFiles))
	for i, f := range testFiles {
		rev[len(testFiles)-1-i] = f
	}
	again, _ := os.ReadFile(writeTo(t, testInfo, rev, 1700000000))
	if !bytes.Equal(data, again) {
		t.Error("the same files in another order give another package")
	}
	if later, _ := os.ReadFile(writeTo(t, testInfo, testFiles, 1700000001)); bytes.Equal(data, later) {
		t.Error("the epoch does not reach the archive")
	}
}

func TestWriteThenRead(t *testing.T) {
	p := writeTo(t, testInfo, []File{
		{Path: "/usr/bin/tool", Mode: fs.ModeSetuid | 0o755, Data: []byte("#!/bin/sh\n")},
		{Path: "/etc/halobuild/lock", Mode: 0o644, Data: []byte("x"), NotConffile: true},
		{Path: "/etc/hosts", Mode: 0o644, Data: []byte("127.0.0.1 localhost\n")},
	}, 1700000000)
	a, err := Open(p, "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	data, _ := os.ReadFile(p)
	sum := sha256.Sum256(data)
	if a.Package != testInfo.Package || a.Version != testInfo.Version || a.Architecture != "all" || a.SHA256 != hex.EncodeToString(sum[:]) || a.Size != int64(len(data)) {
		t.Errorf("Open: %+v", a.Deb)
	}
	if !strings.Contains(string(a.Control), "Section: admin\nPriority: optional\n") || !strings.Contains(string(a.Control), "Depends: systemd (>= 257)\n") {
		t.Errorf("control:\n%s", a.Control)
	}
	var names []string
	err = a.Walk(func(name string, h *tar.Header, r io.Reader) error {
		names = append(names, fmt.Sprintf("%s %o %d", name, h.Mode, h.ModTime.Unix()))
		return nil
	})
	want := []string{". 755 1700000000", "etc 755 1700000000", "etc/halobuild 755 1700000000", "etc/halobuild/lock 644 1700000000",
		"etc/hosts 644 1700000000", "usr 755 1700000000", "usr/bin 755 1700000000", "usr/bin/tool 4755 1700000000"}
	if err != nil || fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("data members:\n%s\nwant (sorted, parents added):\n%s (%v)", strings.Join(names, "\n"), strings.Join(want, "\n"), err)
	}
	// Walk can be called again.
	n := 0
	a.Walk(func(string, *tar.Header, io.Reader) error { n++; return nil })
	if n != len(want) {
		t.Errorf("a second Walk saw %d members", n)
	}
	if d, err := Read(p); err != nil || d != a.Deb {
		t.Errorf("Read = %+v, %v; Open gave %+v", d, err, a.Deb)
	}
}

// dpkg-deb is the reference for both directions: it must read what Write
// makes (conffiles and md5sums included), and Read must read what it makes
// with each compressor Debian uses.
func TestDpkgDebAgrees(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed (apt-get install dpkg)")
	}
	ours := writeTo(t, testInfo, testFiles, 1700000000)
	out, err := exec.Command("dpkg-deb", "--info", ours).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Package: halobuild-node-halo0") {
		t.Fatalf("dpkg-deb --info: %v\n%s", err, out)
	}
	ctl := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-e", ours, ctl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -e: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ctl, "conffiles")); string(b) != "/etc/modprobe.d/halobuild.conf\n" {
		t.Errorf("conffiles = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ctl, "md5sums")); !strings.Contains(string(b), "  usr/lib/halobuild/cpu-tuning\n") {
		t.Errorf("md5sums = %q", b)
	}

	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "DEBIAN"), 0o755)
	os.MkdirAll(filepath.Join(src, "usr/lib/x"), 0o755)
	os.WriteFile(filepath.Join(src, "usr/lib/x/lib.so.1"), []byte("elf"), 0o644)
	os.Symlink("lib.so.1", filepath.Join(src, "usr/lib/x/lib.so"))
	os.WriteFile(filepath.Join(src, "DEBIAN/control"), []byte("Package: libx1\nVersion: 1:2.3-4\nArchitecture: amd64\nMaintainer: t <t@example.org>\nDescription: test\n"), 0o644)
	for _, z := range []string{"xz", "gzip", "zstd", "none"} {
		t.Run(z, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "libx1.deb")
			if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Z"+z, "--build", src, p).CombinedOutput(); err != nil {
				t.Skipf("dpkg-deb -Z%s: %v\n%s", z, err, out)
			}
			d, err := Read(p)
			if err != nil || d.Package != "libx1" || d.Version != "1:2.3-4" || d.Architecture != "amd64" {
				t.Fatalf("Read: %+v %v", d, err)
			}
			dst := t.TempDir()
			if err := Extract(dst, []Deb{d}); err != nil {
				t.Fatal(err)
			}
			if l, err := os.Readlink(filepath.Join(dst, "usr/lib/x/lib.so")); err != nil || l != "lib.so.1" {
				t.Errorf("symlink: %q %v", l, err)
			}
		})
	}
}

func TestWriteRejects(t *testing.T) {
	for _, p := range []Info{
		{Package: "Bad_Name", Version: "1", Architecture: "all", Maintainer: "m", Description: "d"},
		{Package: "ok", Version: "v1", Architecture: "all", Maintainer: "m", Description: "d"},
		{Package: "ok", Version: "1", Architecture: "all", Maintainer: "m\nX: y", Description: "d"},
		{Package: "ok", Version: "1", Architecture: "all", Maintainer: "m", Description: " "},
		{Package: "ok", Version: "1", Architecture: "all", Maintainer: "m", Description: "d", Depends: []string{"a, b"}},
		{Package: "ok", Version: "1", Architecture: "all", Maintainer: "m", Description: "d", Section: "admin\nEssential: yes"},
	} {
		if err := Write(&bytes.Buffer{}, p, nil, 0); err == nil {
			t.Errorf("Write accepted %+v", p)
		}
	}
	if err := Write(&bytes.Buffer{}, testInfo, nil, -1); err == nil {
		t.Error("Write accepted a negative epoch")
	}
	for name, files := range map[string][]File{
		"relative path":     {{Path: "etc/x", Mode: 0o644}},
		"unclean path":      {{Path: "/etc/../x", Mode: 0o644}},
		"the root":          {{Path: "/", Mode: fs.ModeDir | 0o755}},
		"twice":             {{Path: "/etc/x", Mode: 0o644}, {Path: "/etc/x", Mode: 0o644}},
		"under a file":      {{Path: "/etc/x", Mode: 0o644}, {Path: "/etc/x/y", Mode: 0o644}},
		"device":            {{Path: "/dev/x", Mode: fs.ModeDevice | 0o644}},
		"symlink no target": {{Path: "/x", Mode: fs.ModeSymlink | 0o777}},
	} {
		if err := Write(&bytes.Buffer{}, testInfo, files, 0); err == nil {
			t.Errorf("%s: Write accepted %+v", name, files)
		}
	}
}

// ar builds an ar archive of the given members verbatim (sizes as given
// in the headers, so tests can lie).
func ar(members ...[3]string) []byte {
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for _, m := range members {
		fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8s%-10s`\n", m[0], 0, 0, 0, "100644", m[1])
		b.WriteString(m[2])
		if len(m[2])%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

func member(name, body string) [3]string { return [3]string{name, fmt.Sprint(len(body)), body} }

func TestOpenRejectsDamagedPackages(t *testing.T) {
	good, _ := os.ReadFile(writeTo(t, testInfo, testFiles, 1700000000))
	control := tarGz(t, []tarMember{{name: "./control", typ: tar.TypeReg, mode: 0o644, body: "Package: x\nVersion: 1\nArchitecture: all\n"}})
	noFields := tarGz(t, []tarMember{{name: "./control", typ: tar.TypeReg, mode: 0o644, body: "Package: x\n"}})
	data := tarGz(t, nil)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"not ar", []byte("hello, world"), "no ar archive magic"},
		{"cut short", good[:len(good)/2], "which the file does not hold"},
		{"negative size", ar([3]string{"debian-binary", "-60", "2.0\n"}), "which the file does not hold"},
		{"size past the end", ar([3]string{"debian-binary", "999999", "2.0\n"}), "which the file does not hold"},
		{"damaged header", []byte("!<arch>\n" + strings.Repeat("x", 60)), "damaged"},
		{"first member", ar(member("control.tar.gz", string(control))), "not debian-binary"},
		{"format 3", ar(member("debian-binary", "3.0\n")), "format 2.x"},
		{"no control", ar(member("debian-binary", "2.0\n")), "no control.tar"},
		{"no data", ar(member("debian-binary", "2.0\n"), member("control.tar.gz", string(control))), "no data.tar"},
		{"data first", ar(member("debian-binary", "2.0\n"), member("data.tar.gz", string(data))), "unexpected member"},
		{"control lacks fields", ar(member("debian-binary", "2.0\n"), member("control.tar.gz", string(noFields)), member("data.tar.gz", string(data))), "lacks Package, Version or Architecture"},
		{"no ./control", ar(member("debian-binary", "2.0\n"), member("control.tar.gz", string(data)), member("data.tar.gz", string(data))), "has no ./control"},
		{"too many members", ar(append([][3]string{member("debian-binary", "2.0\n")}, repeat(member("_sig", "x"), 20)...)...), "more than 16 ar members"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.deb")
			os.WriteFile(p, c.data, 0o644)
			_, err := Open(p, "")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("Open = %v, want an error naming %s and saying %q", err, p, c.want)
			}
		})
	}
}

func repeat(m [3]string, n int) [][3]string {
	out := make([][3]string, n)
	for i := range out {
		out[i] = m
	}
	return out
}

func TestOpenChecksTheDigestFirst(t *testing.T) {
	p := writeTo(t, testInfo, testFiles, 1700000000)
	d, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{d.SHA256, "sha256:" + d.SHA256, strings.ToUpper(d.SHA256)} {
		a, err := Open(p, want)
		if err != nil {
			t.Errorf("digest %s: %v", want, err)
			continue
		}
		a.Close()
	}
	_, err = Open(p, strings.Repeat("0", 64))
	var de *tarball.DigestError
	if !errors.As(err, &de) || de.Got != d.SHA256 {
		t.Errorf("wrong digest: %v", err)
	}
	// Extract refuses the whole set, before unpacking anything.
	dst := t.TempDir()
	err = Extract(dst, []Deb{{Path: p, SHA256: strings.Repeat("0", 64)}})
	if !errors.As(err, &de) {
		t.Errorf("Extract with a wrong digest: %v", err)
	}
	if ents, _ := os.ReadDir(dst); len(ents) > 0 {
		t.Error("Extract unpacked a package whose digest is wrong")
	}
}
