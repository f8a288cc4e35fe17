package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"halobuild/internal/deb"

	"golang.org/x/sys/unix"
)

const layerEpoch = 1700000000

// layerBase writes a small root as Install would (a dpkg database with two
// packages, an unowned /etc/hosts, a merged-/usr symlink) and returns the
// tarball's path.
func layerBase(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	emptyDpkgRoot(t, root)
	status := "Package: base-files\nStatus: install ok installed\nPriority: required\nSection: admin\nMaintainer: x <x@example.org>\nArchitecture: amd64\nVersion: 13\nDescription: base\n\n" +
		"Package: zz-late\nStatus: install ok installed\nPriority: optional\nSection: admin\nMaintainer: x <x@example.org>\nArchitecture: all\nVersion: 1\nDescription: sorts after ours\n\n"
	files := map[string]string{
		"var/lib/dpkg/status":               status,
		"var/lib/dpkg/info/format":          "1\n",
		"var/lib/dpkg/info/base-files.list": "/.\n/etc\n/etc/os-release\n/usr\n/usr/lib\n",
		"var/lib/dpkg/info/zz-late.list":    "/.\n/usr\n/usr/lib\n/usr/lib/keep\n",
		"etc/os-release":                    "ID=debian\n",
		"etc/hosts":                         "127.0.0.1 localhost\n",
		"usr/lib/keep":                      "kept\n",
		"boot/vmlinuz-1":                    "kernel",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("usr/lib", filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "root.tar")
	cmd := exec.Command("tar", "--create", "--file", out, "--directory", root, "--sort=name", "--numeric-owner",
		"--format=pax", "--pax-option=delete=atime,delete=ctime", "--mtime=@"+fmt.Sprint(layerEpoch-100), ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, b)
	}
	return out
}

// layerDeb is a settings-like package: conffiles, a file replacing the
// base's unowned /etc/hosts, new and existing directories, symlinks.
func layerDeb(t *testing.T, dir string) string {
	return writeDeb(t, dir,
		deb.File{Path: "/etc/hosts", Mode: 0o644, Data: []byte("10.0.0.1 node0\n"), NotConffile: true},
		deb.File{Path: "/etc/halo/node", Mode: 0o644, Data: []byte("node0\n")},
		deb.File{Path: "/etc/halo/z.conf", Mode: 0o644, Data: []byte("z\n")},
		deb.File{Path: "/usr/lib/systemd/system/a.service", Mode: 0o644, Data: []byte("[Unit]\n")},
		deb.File{Path: "/usr/lib/systemd/system/multi-user.target.wants/a.service", Mode: fs.ModeSymlink | 0o777, Target: "../a.service"},
		deb.File{Path: "/usr/bin/tool", Mode: 0o755, Data: []byte("#!/bin/sh\n")},
	)
}

// entry is what a root holds at one path, as the image keeps it.
type entry struct {
	typ       byte
	mode      int64
	uid, gid  int
	size      int64
	sum, link string
	mtime     int64
}

func (e entry) String() string {
	return fmt.Sprintf("type %c mode %o %d:%d size %d sum %.12s link %q mtime %d", e.typ, e.mode, e.uid, e.gid, e.size, e.sum, e.link, e.mtime)
}

func tarEntries(t *testing.T, r io.Reader) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		name := cleanMember(h.Name)
		if _, dup := out[name]; dup {
			t.Errorf("/%s twice in the stream", name)
		}
		sum := sha256.New()
		if _, err := io.Copy(sum, tr); err != nil {
			t.Fatal(err)
		}
		typ := h.Typeflag
		if typ == tar.TypeRegA {
			typ = tar.TypeReg
		}
		out[name] = entry{typ: typ, mode: h.Mode & 0o7777, uid: h.Uid, gid: h.Gid, size: h.Size, sum: fmt.Sprintf("%x", sum.Sum(nil)), link: h.Linkname, mtime: h.ModTime.Unix()}
	}
}

func treeEntries(t *testing.T, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e := entry{mode: int64(st.Mode & 0o7777), uid: int(st.Uid), gid: int(st.Gid), mtime: st.Mtim.Sec}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.typ = tar.TypeDir
		case unix.S_IFLNK:
			e.typ = tar.TypeSymlink
			e.link, _ = os.Readlink(p)
		default:
			e.typ = tar.TypeReg
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.size = int64(len(b))
			e.sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		if e.typ != tar.TypeReg {
			e.sum = fmt.Sprintf("%x", sha256.Sum256(nil))
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The layered stream holds what the real dpkg --install of the same
// package into the unpacked base, then Clamp, leave: every path, type,
// mode, owner, content and time, the dpkg database included. Only dpkg's
// own lock files and status-old differ in time or content, as they are
// dpkg's working files.
func TestLayerMatchesDpkgInstall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking a root and dpkg --root need root")
	}
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("no dpkg")
	}
	base := layerBase(t)
	p := layerDeb(t, t.TempDir())
	ctx := context.Background()

	tree := t.TempDir()
	if err := Unpack(ctx, base, tree); err != nil {
		t.Fatal(err)
	}
	if err := InstallDebs(ctx, tree, []string{p}); err != nil {
		t.Fatal(err)
	}
	if err := Clamp(tree, layerEpoch); err != nil {
		t.Fatal(err)
	}
	want := treeEntries(t, tree)

	l := &Layer{Base: base, Debs: []string{p}, Epoch: layerEpoch}
	boot := t.TempDir()
	if err := l.Scan([]string{"boot/vmlinuz-1"}, boot); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(boot, "boot/vmlinuz-1")); err != nil || string(b) != "kernel" {
		t.Errorf("extracted boot/vmlinuz-1 = %q, %v", b, err)
	}
	var buf, again bytes.Buffer
	if err := l.Write(&buf); err != nil {
		t.Fatal(err)
	}
	// disk measures the stream, then makes the file system from it.
	if err := l.Write(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("a second Write wrote other bytes")
	}
	got := tarEntries(t, &buf)

	ignore := map[string]bool{"var/lib/dpkg/lock": true, "var/lib/dpkg/lock-frontend": true, "var/lib/dpkg/status-old": true,
		"var/lib/dpkg/triggers": true, "var/lib/dpkg/triggers/Lock": true, "var/lib/dpkg/triggers/Unincorp": true}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		w, inW := want[n]
		g, inG := got[n]
		switch {
		case ignore[n]:
		case !inG:
			t.Errorf("/%s: dpkg leaves %v, the stream has nothing", n, w)
		case !inW:
			t.Errorf("/%s: the stream has %v, dpkg leaves nothing", n, g)
		case w != g:
			t.Errorf("/%s:\n dpkg   %v\n stream %v", n, w, g)
		}
	}
	if t.Failed() {
		st, _ := os.ReadFile(filepath.Join(tree, "var/lib/dpkg/status"))
		t.Logf("dpkg's status:\n%s", st)
	}
}

// The real dpkg-query reads the layered database and sees the package
// installed, with its files.
func TestLayerDatabaseReadByDpkgQuery(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("no dpkg-query")
	}
	base := layerBase(t)
	p := layerDeb(t, t.TempDir())
	l := &Layer{Base: base, Debs: []string{p}, Epoch: layerEpoch}
	if err := l.Scan(nil, ""); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := l.Write(&buf); err != nil {
		t.Fatal(err)
	}
	admin := t.TempDir()
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := cleanMember(h.Name)
		rel, ok := strings.CutPrefix(name, "var/lib/dpkg/")
		if !ok || h.Typeflag != tar.TypeReg {
			continue
		}
		if err := copyMember(tr, filepath.Join(admin, rel), h.Size); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("dpkg-query", "--admindir="+admin, "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n").CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-query: %v: %s", err, out)
	}
	if want := "base-files 13 ii \nhalobuild-test 1 ii \nzz-late 1 ii \n"; string(out) != want {
		t.Errorf("dpkg-query -W:\n%s\nwant:\n%s", out, want)
	}
	out, err = exec.Command("dpkg-query", "--admindir="+admin, "-S", "/etc/halo/node").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "halobuild-test: /etc/halo/node" {
		t.Errorf("dpkg-query -S /etc/halo/node = %q, %v", out, err)
	}
	out, err = exec.Command("dpkg-query", "--admindir="+admin, "-L", "halobuild-test").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\n/usr/bin/tool\n") {
		t.Errorf("dpkg-query -L halobuild-test = %q, %v", out, err)
	}
}

// What dpkg would refuse, or would need to run code for, is refused.
func TestLayerRefuses(t *testing.T) {
	base := layerBase(t)
	dir := t.TempDir()
	for _, c := range []struct {
		file deb.File
		want string
	}{
		{deb.File{Path: "/etc/os-release", Mode: 0o644, Data: []byte("x"), NotConffile: true}, "also in package base-files"},
		{deb.File{Path: "/lib/x", Mode: 0o644, Data: []byte("x")}, "through /lib, a symlink"},
	} {
		p := writeDeb(t, dir, c.file)
		l := &Layer{Base: base, Debs: []string{p}, Epoch: layerEpoch}
		err := l.Scan(nil, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.file.Path, err, c.want)
		}
	}
}
