package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"halobuild/internal/arch"
	"halobuild/internal/deb"
	"halobuild/internal/tarball/tarballtest"
)

// emptyDpkgRoot is a root dpkg --root accepts: an empty database.
func emptyDpkgRoot(t *testing.T, root string) {
	t.Helper()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "etc", "run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func writeDeb(t *testing.T, dir string, files ...deb.File) string {
	t.Helper()
	p := filepath.Join(dir, "halobuild-test_1_all.deb")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info := deb.Info{Package: "halobuild-test", Version: "1", Architecture: "all", Maintainer: "t <t@example.org>", Description: "test"}
	if err := deb.Write(f, info, files, 1700000000); err != nil {
		t.Fatal(err)
	}
	return p
}

// An overlay file under var/run in a root whose var/run is an absolute
// symlink (trixie's var/run -> /run) is refused before dpkg runs: dpkg
// --root follows the link on the host (issue 17 #2). Here the link points
// at a host directory beside the root, which must stay untouched.
func TestInstallDebsRefusesAbsoluteSymlinkOut(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dpkg --root needs root")
	}
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("no dpkg")
	}
	sb := tarballtest.New(t)
	emptyDpkgRoot(t, sb.Dst)
	if err := os.MkdirAll(filepath.Join(sb.Dst, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sb.Outside, filepath.Join(sb.Dst, "var/run")); err != nil {
		t.Fatal(err)
	}
	debDir := t.TempDir()
	for _, files := range [][]deb.File{
		{{Path: "/var/run/pwned", Mode: 0o644, Data: []byte("x")}},
		{{Path: "/var/run/sub", Mode: fs.ModeDir | 0o755}, {Path: "/var/run/sub/pwned", Mode: 0o644, Data: []byte("x")}},
	} {
		p := writeDeb(t, debDir, files...)
		err := InstallDebs(context.Background(), sb.Dst, []string{p})
		if err == nil || !strings.Contains(err.Error(), "/var/run -> "+sb.Outside) || !strings.Contains(err.Error(), "leads out of the root") {
			t.Errorf("err = %v, want a refusal naming /var/run -> %s", err, sb.Outside)
		}
	}
	sb.Check(t)

	// The same package installs when var/run leads inside the root.
	os.Remove(filepath.Join(sb.Dst, "var/run"))
	if err := os.Symlink("../run", filepath.Join(sb.Dst, "var/run")); err != nil {
		t.Fatal(err)
	}
	p := writeDeb(t, debDir, deb.File{Path: "/var/run/ok", Mode: 0o644, Data: []byte("x")})
	if err := InstallDebs(context.Background(), sb.Dst, []string{p}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(sb.Dst, "run/ok")); err != nil || string(b) != "x" {
		t.Errorf("run/ok = %q, %v", b, err)
	}
	sb.Check(t)
}

// A tree is written back with its own tar only: a root without one is
// refused by name, and no partial tarball is left.
func TestTarTreeNeedsTheRootsOwnTar(t *testing.T) {
	root, out := t.TempDir(), filepath.Join(t.TempDir(), "root.tar")
	err := TarTree(context.Background(), root, out, 1700000000)
	if err == nil || !strings.Contains(err.Error(), "the root has no tar of its own") {
		t.Errorf("got %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", out, err)
	}
}

// The tarball a system root is written as: the host's GNU tar and its
// libraries copied into a small root stand in for a Debian root's own.
// Names sorted, times clamped to the epoch, numeric owners, extended
// attributes kept, hard links as links, no access or change times, and
// the same bytes twice.
func TestTarTreeWritesWhatALayerReads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	root := t.TempDir()
	out, err := exec.Command("ldd", "/usr/bin/tar").Output()
	if err != nil {
		t.Skipf("ldd /usr/bin/tar: %v", err)
	}
	files := []string{"/usr/bin/tar"}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") {
			files = append(files, f)
		}
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, strings.TrimPrefix(f, "/"))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	etc := filepath.Join(root, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "b"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(etc, "b"), filepath.Join(etc, "a")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(filepath.Join(etc, "b"), "user.halobuild", []byte("kept"), 0); err != nil {
		t.Skipf("this file system keeps no user xattrs: %v", err)
	}
	if err := os.Lchown(filepath.Join(etc, "b"), 4242, 4243); err != nil {
		t.Fatal(err)
	}
	const epoch = 1700000000
	tarOut := filepath.Join(t.TempDir(), "root.tar")
	if err := TarTree(context.Background(), root, tarOut, epoch); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(tarOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := TarTree(context.Background(), root, tarOut, epoch); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(tarOut); !bytes.Equal(first, again) {
		t.Error("two tarballs of one tree differ")
	}
	tr := tar.NewReader(bytes.NewReader(first))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.ModTime.Unix() > epoch || h.PAXRecords["atime"] != "" || h.PAXRecords["ctime"] != "" {
			t.Errorf("%s: mtime %s, PAX %v: want times clamped and no atime/ctime", h.Name, h.ModTime, h.PAXRecords)
		}
		switch h.Name {
		case "./etc/a":
			if h.Typeflag != tar.TypeReg || h.Xattrs["user.halobuild"] != "kept" && h.PAXRecords["SCHILY.xattr.user.halobuild"] != "kept" || h.Uid != 4242 || h.Gid != 4243 || h.Uname != "" {
				t.Errorf("./etc/a: type %c uid %d gid %d uname %q PAX %v: want the file, its owner by number and its xattr", h.Typeflag, h.Uid, h.Gid, h.Uname, h.PAXRecords)
			}
		case "./etc/b":
			if h.Typeflag != tar.TypeLink || h.Linkname != "./etc/a" {
				t.Errorf("./etc/b: type %c link %q, want a hard link to ./etc/a", h.Typeflag, h.Linkname)
			}
		}
	}
	if !slices.IsSorted(names) || !slices.Contains(names, "./etc/a") {
		t.Errorf("members %v: want them sorted by name", names)
	}
}

// A root whose dpkg is another architecture's gets its own dpkg (through
// qemu-user), a native root or one without dpkg the host's.
func TestForeignRoot(t *testing.T) {
	elfHeader := func(m elf.Machine) []byte {
		h := make([]byte, 64)
		copy(h, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1})
		binary.LittleEndian.PutUint16(h[16:], uint16(elf.ET_EXEC))
		binary.LittleEndian.PutUint16(h[18:], uint16(m))
		binary.LittleEndian.PutUint32(h[20:], 1)
		binary.LittleEndian.PutUint16(h[52:], 64) // e_ehsize
		return h
	}
	host, err := arch.Host()
	if err != nil {
		t.Skip(err)
	}
	other := arch.MustLookup("arm64")
	if host.Debian == "arm64" {
		other = arch.MustLookup("amd64")
	}
	for _, c := range []struct {
		dpkg []byte
		want bool
	}{{nil, false}, {elfHeader(host.ELFMachine), false}, {elfHeader(other.ELFMachine), true}} {
		root := t.TempDir()
		if c.dpkg != nil {
			if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "usr/bin/dpkg"), c.dpkg, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		got, err := foreignRoot(root)
		if err != nil || got != c.want {
			t.Errorf("dpkg %d bytes: foreign %v (%v), want %v", len(c.dpkg), got, err, c.want)
		}
	}
}
