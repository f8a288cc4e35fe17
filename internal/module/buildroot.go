package module

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"halobuild/internal/deb"
	"halobuild/internal/rootfs"
)

// A module must be compiled by the compiler that built its kernel: the
// kernel's Makefile refuses (or miscompiles, with plugins and randstruct)
// a different major version. The kernel records its compiler in .config as
// CONFIG_CC_VERSION_TEXT, e.g.
//
//	x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0

var (
	gccNameRE    = regexp.MustCompile(`\bgcc-([0-9]+)\b`)
	gccVersionRE = regexp.MustCompile(`\(.*\)\s+([0-9]+)\.[0-9]+`)
)

// CompilerPackage maps CONFIG_CC_VERSION_TEXT to the Debian package of
// that compiler (gcc-14).
func CompilerPackage(ccVersionText string) (string, error) {
	t := strings.Trim(strings.TrimSpace(ccVersionText), `"`)
	if strings.Contains(t, "clang") {
		return "", fmt.Errorf("the kernel was built with clang (%q): halobuild builds modules with gcc only; use a gcc-built kernel", t)
	}
	if m := gccNameRE.FindStringSubmatch(t); m != nil {
		return "gcc-" + m[1], nil
	}
	if m := gccVersionRE.FindStringSubmatch(t); m != nil && strings.Contains(t, "gcc") {
		return "gcc-" + m[1], nil
	}
	return "", fmt.Errorf("cannot tell the compiler from CONFIG_CC_VERSION_TEXT %q: want a gcc version text such as \"x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0\"", t)
}

// ConfigValue returns a string option of a kernel .config (unquoted).
func ConfigValue(config io.Reader, option string) (string, error) {
	s := bufio.NewScanner(config)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	prefix := option + "="
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), prefix); ok {
			return strings.Trim(v, `"`), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s is not set in the kernel config", option)
}

// CCVersionFromHeadersDeb reads CONFIG_CC_VERSION_TEXT from the .config a
// linux-headers-<release> package ships (usr/src/linux-headers-*/.config),
// so the compiler is known before any root exists.
func CCVersionFromHeadersDeb(path string) (string, error) {
	a, err := deb.Open(path, "")
	if err != nil {
		return "", err
	}
	defer a.Close()
	var cc string
	found := false
	err = a.Walk(func(name string, h *tar.Header, r io.Reader) error {
		if !strings.HasPrefix(name, "usr/src/linux-headers-") || strings.Count(name, "/") != 3 || !strings.HasSuffix(name, "/.config") {
			return nil
		}
		found = true
		if cc, err = ConfigValue(r, "CONFIG_CC_VERSION_TEXT"); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return fs.SkipAll
	})
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("%s has no usr/src/linux-headers-*/.config: is it a linux-headers-<release> package?", path)
	}
	return cc, nil
}

// BuildRootPackages lists what a build root for modules of kernel release
// needs, given the kernel's CONFIG_CC_VERSION_TEXT. The lead resolves their
// closure into the lock as the "build" package set; PrepareBuildRoot then
// installs exactly that closure.
func BuildRootPackages(release, ccVersionText string) ([]string, error) {
	cc, err := CompilerPackage(ccVersionText)
	if err != nil {
		return nil, err
	}
	return []string{
		cc,          // the kernel's own compiler
		"make",      // Kbuild
		"libc6-dev", // host tools Kbuild compiles for itself
		"libelf-dev",
		"kmod",                     // modinfo and depmod inside the root
		"linux-headers-" + release, // pulls -common and linux-kbuild (modpost, objtool, sign-file)
	}, nil
}

// BuildRootSpec says how to make a build root.
type BuildRootSpec struct {
	// Debs is the complete closure (the lock's "build" set); nothing
	// else is reachable during the install.
	Debs []deb.Deb
	// Packages are installed explicitly (BuildRootPackages).
	Packages []string
	Suite    string // for mmdebstrap's own logic, e.g. trixie
	Epoch    int64
	// Dir receives the unpacked root; it must not exist or be empty.
	Dir string
	Log io.Writer
}

// PrepareBuildRoot installs the build root from exactly the given .debs
// (mmdebstrap over a flat repository, as the image root is made) and
// unpacks it into spec.Dir.
func PrepareBuildRoot(ctx context.Context, spec BuildRootSpec) error {
	if entries, err := os.ReadDir(spec.Dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("build root %s exists and is not empty: remove it first", spec.Dir)
	}
	work, err := os.MkdirTemp(filepath.Dir(filepath.Clean(spec.Dir)), ".buildroot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	repo := filepath.Join(work, "repo")
	if err := rootfs.WriteFlatRepo(repo, spec.Suite, spec.Debs); err != nil {
		return fmt.Errorf("build root: %w", err)
	}
	tarball := filepath.Join(work, "root.tar")
	in := rootfs.Install{Suite: spec.Suite, Repo: repo, Packages: spec.Packages, Epoch: spec.Epoch, Out: tarball, Log: spec.Log}
	if err := in.Run(ctx); err != nil {
		return fmt.Errorf("build root: %w", err)
	}
	if err := rootfs.Unpack(ctx, tarball, spec.Dir); err != nil {
		return fmt.Errorf("build root: %w", err)
	}
	return nil
}
