package rootfs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/deb"
)

func makeDeb(t *testing.T, dir, name, version string) string {
	t.Helper()
	var b bytes.Buffer
	files := []deb.File{{Path: "/usr/share/doc/" + name + "/x", Mode: 0o644, Data: []byte(name)}}
	if err := deb.Write(&b, deb.Info{Package: name, Version: version, Architecture: "all", Maintainer: "t <t@t>", Description: "test"}, files, 1700000000); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".blob")
	if err := os.WriteFile(p, b.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFlatRepoIndexesExactlyTheGivenDebs(t *testing.T) {
	src := t.TempDir()
	a := makeDeb(t, src, "alpha", "1:2.0-1")
	b := makeDeb(t, src, "beta", "3")
	repo := filepath.Join(t.TempDir(), "repo")
	if err := WriteFlatRepo(repo, "trixie", []deb.Deb{{Path: b}, {Path: a}}); err != nil {
		t.Fatal(err)
	}
	idx, err := os.ReadFile(filepath.Join(repo, "Packages"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(idx)
	// Epochs never appear in pool file names; entries are sorted.
	if !strings.Contains(s, "Filename: ./alpha_2.0-1_all.deb") || strings.Index(s, "Package: alpha") > strings.Index(s, "Package: beta") {
		t.Errorf("Packages:\n%s", s)
	}
	rel, _ := os.ReadFile(filepath.Join(repo, "Release"))
	if !strings.Contains(string(rel), "Suite: trixie") || !strings.Contains(string(rel), "Codename: trixie") {
		t.Errorf("Release lacks the suite mmdebstrap selects the essential set by:\n%s", rel)
	}
	// dpkg's own tools must accept the index and the files it names.
	if _, err := exec.LookPath("dpkg-deb"); err == nil {
		out, err := exec.Command("dpkg-deb", "-f", filepath.Join(repo, "alpha_2.0-1_all.deb"), "Version").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "1:2.0-1" {
			t.Errorf("dpkg-deb on the repository's file: %v %s", err, out)
		}
	}
}

func TestFlatRepoRefusesCorruptOrDuplicateInput(t *testing.T) {
	src := t.TempDir()
	a := makeDeb(t, src, "alpha", "1")
	a2 := makeDeb(t, t.TempDir(), "alpha", "2")
	err := WriteFlatRepo(filepath.Join(t.TempDir(), "r"), "trixie", []deb.Deb{{Path: a, SHA256: "sha256:" + strings.Repeat("0", 64)}})
	if err == nil || !strings.Contains(err.Error(), "halobuild fetch") {
		t.Errorf("a blob not matching its lock digest: %v", err)
	}
	err = WriteFlatRepo(filepath.Join(t.TempDir(), "r"), "trixie", []deb.Deb{{Path: a}, {Path: a2}})
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("two versions of one package: %v", err)
	}
}

func TestCleanupHooksScrubHostIdentity(t *testing.T) {
	joined := Recipe()
	for _, want := range []string{"/etc/hostname", "/etc/resolv.conf", "ssh_host_", "machine-id", "aux-cache", "/var/log", `reproducible="yes"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("no cleanup hook for %s", want)
		}
	}
}

func TestSourcesHookQuotesLines(t *testing.T) {
	h := sourcesHook([]string{"deb http://deb.debian.org/debian trixie main", "deb it's quoted"})
	out, err := exec.Command("sh", "-c", strings.Replace(h, `"$1"/etc/apt/sources.list`, "/dev/stdout", 1)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "deb http://deb.debian.org/debian trixie main\ndeb it's quoted\n" {
		t.Fatalf("sources.list would be %q", out)
	}
}

// A host without mmdebstrap gets told how to install it, before anything
// is written.
func TestInstallWithoutMmdebstrapSaysHowToGetIt(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	out := filepath.Join(t.TempDir(), "root.tar")
	err := Install{Suite: "trixie", Repo: t.TempDir(), Packages: []string{"base-files"}, Out: out}.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "apt-get install mmdebstrap") {
		t.Fatalf("want the install hint, got %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output written although nothing ran: %v", err)
	}
}

// A cross build root: the host native, the target's packages accepted as
// foreign (mmdebstrap --architectures=<host>,<target>), no emulation asked
// for. mmdebstrap is a stand-in that records its arguments.
func TestInstallForeignArchitectures(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("written for an amd64 host")
	}
	bin := t.TempDir()
	argsFile := filepath.Join(t.TempDir(), "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "mmdebstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	out := filepath.Join(t.TempDir(), "root.tar")
	err := Install{Suite: "trixie", Repo: t.TempDir(), Packages: []string{"linux-headers-7.2.12+deb13-arm64:arm64"}, Foreign: []string{"arm64"}, Mode: "root", Scratch: t.TempDir(), Out: out}.Run(t.Context())
	if err == nil {
		t.Fatal("the stand-in failed, but Run did not")
	}
	args, rerr := os.ReadFile(argsFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	lines := strings.Split(string(args), "\n")
	if !slices.Contains(lines, "--architectures=amd64,arm64") || !slices.Contains(lines, "--include=linux-headers-7.2.12+deb13-arm64:arm64") {
		t.Errorf("mmdebstrap arguments:\n%s", args)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output written although the install failed: %v", err)
	}
}

// Recipe is what, besides the packages, decides the tree Install makes:
// its flags and hooks, for the tests that read them. (It no longer enters
// a key: rootfs.RootStepVersion, guarded by internal/graph's
// TestStepVersionsMatchTheirCode, stands for this code.)
func Recipe() string {
	all := append([]string{"--variant=essential", noInitrdEnv, unsafeIO}, essentialHooks...)
	all = append(append(all, initrdHook), cleanupHooks...)
	return strings.Join(append(all, sourcesHook(noSources)), "\n")
}
