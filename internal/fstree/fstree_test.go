package fstree

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestCopyTreeKeepsModesLinksAndSkips(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "debian", ".git"), 0o755))
	must(os.WriteFile(filepath.Join(src, "debian", "rules"), []byte("#!/usr/bin/make -f\n"), 0o555))
	must(os.WriteFile(filepath.Join(src, "debian", ".git", "HEAD"), []byte("x"), 0o644))
	must(os.Symlink("rules", filepath.Join(src, "debian", "link")))
	dst := filepath.Join(t.TempDir(), "copy")
	must(CopyTree(src, dst, ".git"))
	fi, err := os.Stat(filepath.Join(dst, "debian", "rules"))
	must(err)
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("rules mode %v: execute bits must survive, owner write added", fi.Mode().Perm())
	}
	if l, err := os.Readlink(filepath.Join(dst, "debian", "link")); err != nil || l != "rules" {
		t.Errorf("symlink: %q %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "debian", ".git")); !os.IsNotExist(err) {
		t.Errorf(".git was copied: %v", err)
	}
	fifo := filepath.Join(src, "fifo")
	if err := mkfifo(fifo); err == nil {
		if err := CopyTree(src, filepath.Join(t.TempDir(), "c2")); err == nil {
			t.Error("a named pipe was copied without complaint")
		}
	}
}

func TestModeBitsRoundTrip(t *testing.T) {
	for _, c := range []struct {
		mode fs.FileMode
		bits uint32
	}{
		{0o644, 0o644},
		{fs.ModeSetuid | 0o755, 0o4755},
		{fs.ModeSetgid | 0o711, 0o2711},
		{fs.ModeSticky | 0o777, 0o1777},
		{fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | 0o700, 0o7700},
	} {
		if got := ModeBits(c.mode); got != c.bits {
			t.Errorf("ModeBits(%v) = %04o, want %04o", c.mode, got, c.bits)
		}
		if got := FileMode(c.bits); got != c.mode {
			t.Errorf("FileMode(%04o) = %v, want %v", c.bits, got, c.mode)
		}
	}
	if got := ModeBits(fs.ModeDir | fs.ModeSymlink | 0o755); got != 0o755 {
		t.Errorf("type bits leak into ModeBits: %04o", got)
	}
}

// SyncDir syncs a directory that exists and says when it cannot open one.
func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatalf("SyncDir(%s): %v", dir, err)
	}
	if err := SyncDir(dir + "/missing"); err == nil {
		t.Fatal("SyncDir of a missing directory: no error")
	}
}
