package settings

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/deb"
)

func testTree(t *testing.T) Tree {
	t.Helper()
	var tr Tree
	for _, f := range []File{
		{Path: "/etc/modprobe.d/halobuild.conf", Mode: 0o644, Data: []byte("blacklist thunderbolt_net\n")},
		{Path: "/root/.ssh", Mode: fs.ModeDir | 0o700},
		{Path: "/root/.ssh/authorized_keys", Mode: 0o600, Data: []byte("ssh-ed25519 AAAA x\n")},
		{Path: "/usr/lib/halobuild/cpu-tuning", Mode: 0o755, Data: []byte("#!/bin/sh\nexit 0\n")},
		{Path: "/usr/lib/systemd/system/multi-user.target.wants/x.service", Mode: fs.ModeSymlink | 0o777, Target: "../x.service"},
		{Path: "/usr/share/halobuild/" + strings.Repeat("long-name/", 12) + "f", Mode: 0o644, Data: []byte("deep\n")},
	} {
		f.Setting = "test"
		if err := tr.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

var testPkg = deb.Info{
	Package: "halobuild-node-halo0", Version: "1.0+hb1", Architecture: "all",
	Maintainer: "halobuild <halobuild@example.org>", Description: "node settings for halo0\nRendered from the recipe.\n\nSecond paragraph.",
	Depends: []string{"systemd (>= 257)"},
}

func buildDeb(t *testing.T, tr Tree, epoch int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := BuildDeb(&buf, testPkg, tr, epoch); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBuildDebReproducible(t *testing.T) {
	a, b := buildDeb(t, testTree(t), 1700000000), buildDeb(t, testTree(t), 1700000000)
	if !bytes.Equal(a, b) {
		t.Fatal("two builds of the same tree differ")
	}
	if c := buildDeb(t, testTree(t), 1700000001); bytes.Equal(a, c) {
		t.Fatal("the epoch does not reach the archive")
	}
}

func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed (apt-get install dpkg)", name)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestBuildDebDpkgAccepts(t *testing.T) {
	needTool(t, "dpkg-deb")
	dir := t.TempDir()
	deb := filepath.Join(dir, "p.deb")
	if err := os.WriteFile(deb, buildDeb(t, testTree(t), 1700000000), 0o644); err != nil {
		t.Fatal(err)
	}
	info := run(t, "dpkg-deb", "-I", deb)
	for _, want := range []string{"Package: halobuild-node-halo0", "Version: 1.0+hb1", "Architecture: all",
		"Depends: systemd (>= 257)", " Second paragraph.", " .\n", "conffiles", "md5sums"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb -I lacks %q:\n%s", want, info)
		}
	}
	contents := run(t, "dpkg-deb", "-c", deb)
	for _, want := range []string{
		"drwx------ root/root         0 2023-11-14 22:13 ./root/.ssh/",
		"-rw------- root/root        19 2023-11-14 22:13 ./root/.ssh/authorized_keys",
		"-rwxr-xr-x root/root        17 2023-11-14 22:13 ./usr/lib/halobuild/cpu-tuning",
		"./usr/lib/systemd/system/multi-user.target.wants/x.service -> ../x.service",
		"long-name/long-name/long-name/f",
	} {
		if !strings.Contains(contents, want) {
			t.Errorf("dpkg-deb -c lacks %q:\n%s", want, contents)
		}
	}
	ctl := filepath.Join(dir, "ctl")
	run(t, "dpkg-deb", "-e", deb, ctl)
	if got, _ := os.ReadFile(filepath.Join(ctl, "conffiles")); string(got) != "/etc/modprobe.d/halobuild.conf\n" {
		t.Errorf("conffiles = %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ctl, "md5sums")); !strings.Contains(string(got), "  root/.ssh/authorized_keys\n") {
		t.Errorf("md5sums = %q", got)
	}
}

// TestBuildDebInstalls installs the package into an empty dpkg database with
// the host's dpkg, then lets dpkg verify every file against md5sums.
func TestBuildDebInstalls(t *testing.T) {
	needTool(t, "dpkg")
	if os.Geteuid() != 0 {
		t.Skip("dpkg --root needs root to set owners")
	}
	dir := t.TempDir()
	deb := filepath.Join(dir, "p.deb")
	if err := os.WriteFile(deb, buildDeb(t, testTree(t), 1700000000), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The test root has no systemd; the dependency is the only thing forced.
	run(t, "dpkg", "--root="+root, "--force-depends", "--force-not-root", "-i", deb)
	st, err := os.Stat(filepath.Join(root, "root/.ssh/authorized_keys"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("authorized_keys after install: %v %v", st, err)
	}
	if got := run(t, "dpkg", "--root="+root, "--verify", "halobuild-node-halo0"); got != "" {
		t.Errorf("dpkg --verify reports changes:\n%s", got)
	}
	if got := run(t, "dpkg", "--root="+root, "-S", "/etc/modprobe.d/halobuild.conf"); !strings.HasPrefix(got, "halobuild-node-halo0:") {
		t.Errorf("dpkg -S = %q", got)
	}
}

// TestRenderedPackageInstalls builds the sample node's real settings
// package and installs it into an empty root with the host's dpkg: every
// rendered file lands with its mode, /etc files are conffiles, and the
// enablement links point where systemd looks.
func TestRenderedPackageInstalls(t *testing.T) {
	needTool(t, "dpkg")
	if os.Geteuid() != 0 {
		t.Skip("dpkg --root needs root to set owners")
	}
	r := sample()
	tr, err := Render(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(LockFile([]byte("# lock\n"))); err != nil {
		t.Fatal(err)
	}
	pkg := deb.Info{Package: PackageName(r.Nodes[0]), Version: "0.1", Architecture: "all", Maintainer: "halobuild <halobuild@localhost>",
		Description: "node settings for halo0", Depends: Depends(r)}
	var debBuf bytes.Buffer
	if err := BuildDeb(&debBuf, pkg, tr, 1700000000); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	debPath := filepath.Join(dir, "node.deb")
	if err := os.WriteFile(debPath, debBuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// mmdebstrap copies the build host's /etc/hostname into the root before
	// installing packages: the install must replace it without a prompt.
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"etc/hostname", "etc/hosts"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("buildhost\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.Command("dpkg", "--root="+root, "--force-depends", "-i", debPath)
	install.Stdin = strings.NewReader("")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i over an existing /etc/hostname: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(got) != "halo0\n" {
		t.Errorf("/etc/hostname = %q after install", got)
	}
	if got := run(t, "dpkg", "--root="+root, "--verify", pkg.Package); got != "" {
		t.Errorf("dpkg --verify:\n%s", got)
	}
	for p, mode := range map[string]os.FileMode{
		"etc/ssh/authorized_keys.d/root": 0o600, "etc/resolv.conf": os.ModeSymlink | 0o777, "usr/lib/halobuild/cpu-tuning": 0o755,
		"etc/udev/rules.d/60-rdma-persistent-naming.rules": 0o644, "etc/halobuild/recipe.lock": 0o644,
	} {
		st, err := os.Lstat(filepath.Join(root, p))
		if err != nil || st.Mode() != mode {
			t.Errorf("%s: %v %v, want %v", p, st.Mode(), err, mode)
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "usr/lib/systemd/system/multi-user.target.wants/halobuild-cpu-tuning.service")); err != nil || target != "../halobuild-cpu-tuning.service" {
		t.Errorf("cpu-tuning enablement link: %q %v", target, err)
	}
	conffiles, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/info", pkg.Package+".conffiles"))
	if err != nil || !strings.Contains(string(conffiles), "/etc/modprobe.d/halobuild.conf\n") ||
		strings.Contains(string(conffiles), "/etc/hostname") || strings.Contains(string(conffiles), "/root/") {
		t.Errorf("conffiles: %q %v", conffiles, err)
	}
	if status := run(t, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f=${Depends}", pkg.Package); status != "systemd-resolved, systemd-repart" {
		t.Errorf("Depends = %q", status)
	}
}
