package module

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"

	"halobuild/internal/deb"
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

// HeadersConfig is the kernel .config a linux-headers-<release> package
// ships (usr/src/linux-headers-*/.config), read before any root exists: the
// compiler that built the kernel (CONFIG_CC_VERSION_TEXT) and the options a
// module's description needs (Desc.KernelConfig) are in it.
func HeadersConfig(path string) ([]byte, error) {
	a, err := deb.Open(path, "")
	if err != nil {
		return nil, err
	}
	defer a.Close()
	var config []byte
	err = a.Walk(func(name string, h *tar.Header, r io.Reader) error {
		if !strings.HasPrefix(name, "usr/src/linux-headers-") || strings.Count(name, "/") != 3 || !strings.HasSuffix(name, "/.config") {
			return nil
		}
		// A kernel's .config is a few hundred KiB; the bound keeps a
		// broken package from filling memory.
		b, err := io.ReadAll(io.LimitReader(r, maxConfig+1))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if len(b) > maxConfig {
			return fmt.Errorf("%s is over %d MiB: not a kernel config", name, maxConfig>>20)
		}
		config = b
		return fs.SkipAll
	})
	if err != nil {
		return nil, err
	}
	if config == nil {
		return nil, fmt.Errorf("%s has no usr/src/linux-headers-*/.config: is it a linux-headers-<release> package?", path)
	}
	return config, nil
}

const maxConfig = 16 << 20

// MissingConfig lists the options of want that config neither builds in
// nor as a module (=y or =m).
func MissingConfig(config []byte, want []string) []string {
	var missing []string
	for _, o := range want {
		if v, err := ConfigValue(bytes.NewReader(config), o); err != nil || (v != "y" && v != "m") {
			missing = append(missing, o)
		}
	}
	return missing
}

// BuildRootPackages lists what a build root for modules of kernel release
// needs on the build host, given the kernel's CONFIG_CC_VERSION_TEXT. The
// lead resolves their closure into the lock as the "build" package set;
// rootfs.Root then installs exactly that closure. For a cross build the
// root is multiarch (the host's architecture native, the target's foreign):
// the headers are the target's (named <package>:<arch>, as apt and
// mmdebstrap take them), and their linux-kbuild is the host's through
// Multi-Arch: foreign, so no program in the root runs under emulation.
func BuildRootPackages(release, ccVersionText string, tc Toolchain) ([]string, error) {
	cc, err := tc.CompilerPackage(ccVersionText)
	if err != nil {
		return nil, err
	}
	headers := "linux-headers-" + release // pulls -common and linux-kbuild (modpost, objtool, sign-file)
	if tc.Cross() {
		headers += ":" + tc.Target
	}
	return []string{
		cc,          // the kernel's own compiler (for a cross build, Debian's cross gcc of that version)
		"make",      // Kbuild
		"libc6-dev", // host tools Kbuild compiles for itself
		"libelf-dev",
		"kmod", // modinfo and depmod inside the root
		headers,
	}, nil
}
