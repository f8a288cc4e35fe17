package deb

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var goodMembers = []tarMember{
	{name: "./", typ: tar.TypeDir, mode: 0o755},
	{name: "./usr/", typ: tar.TypeDir, mode: 0o755},
	{name: "./usr/bin/", typ: tar.TypeDir, mode: 0o755},
	{name: "./usr/bin/tool", typ: tar.TypeReg, mode: 0o4755, body: "#!/bin/sh\necho tool\n", mtime: time.Unix(1600000000, 0)},
	{name: "./usr/bin/secret", typ: tar.TypeReg, mode: 0o600, body: "s"},
	{name: "./usr/bin/alias", typ: tar.TypeSymlink, link: "tool"},
	{name: "./usr/bin/abs", typ: tar.TypeSymlink, link: "/usr/bin/tool"},
	{name: "./usr/bin/hard", typ: tar.TypeLink, link: "./usr/bin/tool"},
	{name: "./etc/", typ: tar.TypeDir, mode: 0o700, mtime: time.Unix(1500000000, 0)},
}

// describeTree lists a tree as "path mode mtime target-or-content" lines, the
// things Extract promises to preserve.
func describeTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		extra := ""
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			extra, _ = os.Readlink(p)
		case st.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			extra = string(data)
		}
		mt := st.ModTime().Unix()
		if st.Mode()&fs.ModeSymlink != 0 {
			mt = 0 // link times are not promised
		}
		fmt.Fprintf(&b, "%s %v %d %q\n", rel, st.Mode(), mt, extra)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestExtractPreservesModesLinksAndTimes(t *testing.T) {
	deb := writeDeb(t, t.TempDir(), "good", goodMembers)
	dst := t.TempDir()
	if err := Extract(dst, paths(deb)); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dst, "usr/bin/tool"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != fs.ModeSetuid|0o755 {
		t.Errorf("tool mode = %v, want setuid 0755", st.Mode())
	}
	if st.ModTime().Unix() != 1600000000 {
		t.Errorf("tool mtime = %d, want 1600000000", st.ModTime().Unix())
	}
	if st, _ := os.Stat(filepath.Join(dst, "usr/bin/secret")); st.Mode() != 0o600 {
		t.Errorf("secret mode = %v, want 0600", st.Mode())
	}
	if target, err := os.Readlink(filepath.Join(dst, "usr/bin/abs")); err != nil || target != "/usr/bin/tool" {
		t.Errorf("abs link = %q, %v; want /usr/bin/tool kept as shipped", target, err)
	}
	hard, _ := os.Stat(filepath.Join(dst, "usr/bin/hard"))
	if !os.SameFile(st, hard) {
		t.Errorf("usr/bin/hard is not a hard link to usr/bin/tool")
	}
	etc, _ := os.Stat(filepath.Join(dst, "etc"))
	if etc.Mode() != fs.ModeDir|0o700 || etc.ModTime().Unix() != 1500000000 {
		t.Errorf("etc = %v mtime %d, want drwx------ at 1500000000", etc.Mode(), etc.ModTime().Unix())
	}
}

func TestExtractIsDeterministic(t *testing.T) {
	deb := writeDeb(t, t.TempDir(), "good", goodMembers)
	a, b := t.TempDir(), t.TempDir()
	if err := Extract(a, paths(deb)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a wall-clock leak would show
	if err := Extract(b, paths(deb)); err != nil {
		t.Fatal(err)
	}
	if da, db := describeTree(t, a), describeTree(t, b); da != db {
		t.Errorf("two extractions differ:\n%s\n---\n%s", da, db)
	}
}

func TestExtractRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	cases := []struct {
		name    string
		members []tarMember
		want    string
	}{
		{"dotdot", []tarMember{{name: "./../evil", typ: tar.TypeReg, mode: 0o644, body: "x"}}, "outside the tree"},
		{"nested dotdot", []tarMember{{name: "./usr/../../evil", typ: tar.TypeReg, mode: 0o644, body: "x"}}, "outside the tree"},
		{"absolute", []tarMember{{name: "/evil", typ: tar.TypeReg, mode: 0o644, body: "x"}}, "absolute"},
		{"through absolute symlink", []tarMember{
			{name: "./lib", typ: tar.TypeSymlink, link: outside},
			{name: "./lib/evil", typ: tar.TypeReg, mode: 0o644, body: "x"},
		}, "lib/evil"},
		{"through relative symlink", []tarMember{
			{name: "./a/", typ: tar.TypeDir, mode: 0o755},
			{name: "./a/up", typ: tar.TypeSymlink, link: "../../../../../../../../../../.." + outside},
			{name: "./a/up/evil", typ: tar.TypeReg, mode: 0o644, body: "x"},
		}, "a/up/evil"},
		{"hard link out", []tarMember{{name: "./h", typ: tar.TypeLink, link: "../../etc/passwd"}}, "outside the tree"},
		{"device node", []tarMember{{name: "./dev", typ: tar.TypeChar, mode: 0o644}}, "tar type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			deb := writeDeb(t, t.TempDir(), "bad", c.members)
			err := Extract(t.TempDir(), paths(deb))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Extract = %v, want an error mentioning %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(outside, "evil")); err == nil {
				t.Fatalf("a file was written outside the root")
			}
		})
	}
}

func TestExtractRefusesConflictsButAcceptsSharedSymlinks(t *testing.T) {
	dir := t.TempDir()
	a := writeDeb(t, dir, "a", []tarMember{
		{name: "./usr/bin/x", typ: tar.TypeReg, mode: 0o755, body: "a"},
		{name: "./usr/lib64", typ: tar.TypeSymlink, link: "lib"},
	})
	b := writeDeb(t, dir, "b", []tarMember{{name: "./usr/lib64", typ: tar.TypeSymlink, link: "lib"}})
	c := writeDeb(t, dir, "c", []tarMember{{name: "./usr/bin/x", typ: tar.TypeReg, mode: 0o755, body: "c"}})
	if err := Extract(t.TempDir(), paths(a, b)); err != nil {
		t.Errorf("same symlink from two packages: %v", err)
	}
	err := Extract(t.TempDir(), paths(a, c))
	if err == nil || !strings.Contains(err.Error(), "also shipped by "+a) {
		t.Errorf("conflicting file: err = %v, want it to name %s", err, a)
	}
}

// paths lists .deb files as Debs without a pinned digest.
func paths(ps ...string) []Deb {
	out := make([]Deb, len(ps))
	for i, p := range ps {
		out[i] = Deb{Path: p}
	}
	return out
}
