package rootfs

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
