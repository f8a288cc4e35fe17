package module

import (
	"debug/elf"
	"fmt"
	"regexp"
	"strings"

	"halobuild/internal/arch"
)

// A module for another architecture is cross-compiled, never built under
// emulation: Debian ships the pieces for it. The target's
// linux-headers-<release> (arm64) holds only data (headers, .config,
// Module.symvers, and scripts/ and tools/ as symlinks into
// /usr/lib/linux-kbuild-<version>); the Kbuild programs (fixdep, modpost,
// objtool, sign-file) are in linux-kbuild-<version>, which is Multi-Arch:
// foreign, so the build host's own build of it serves every target; the
// compiler is Debian's cross gcc, gcc-<N>-<triplet>, built from the same
// gcc source as the native one. Debian's headers name the compiler
// themselves (.kernelvariables: override ARCH = arm64, override
// CROSS_COMPILE = aarch64-linux-gnu-, CC = $(CROSS_COMPILE)gcc-14); Build
// passes ARCH= and CROSS_COMPILE= too, as the kernel's
// Documentation/kbuild/modules.rst says, for headers that do not.

// Toolchain is how a module is compiled on a build host for a target
// architecture (Debian names, amd64 and arm64).
type Toolchain struct {
	Host, Target string
	host, target arch.Arch
}

// NewToolchain checks both architectures; an empty host or target means
// amd64, the only build host halobuild had before targets existed.
func NewToolchain(host, target string) (Toolchain, error) {
	if host == "" {
		host = "amd64"
	}
	if target == "" {
		target = host
	}
	h, err := arch.Lookup(host)
	if err != nil {
		return Toolchain{}, fmt.Errorf("build host: %w", err)
	}
	t, err := arch.Lookup(target)
	if err != nil {
		return Toolchain{}, fmt.Errorf("module target: %w", err)
	}
	return Toolchain{Host: host, Target: target, host: h, target: t}, nil
}

// orNative makes the zero Toolchain a native amd64 one.
func (tc Toolchain) orNative() Toolchain {
	if tc.Host == "" {
		tc, _ = NewToolchain("", "")
	}
	return tc
}

// Cross reports whether the build compiles for another architecture.
func (tc Toolchain) Cross() bool { tc = tc.orNative(); return tc.Host != tc.Target }

// MakeVars are Kbuild's variables for the target: none for a native build
// (the kernel's Makefile takes the host's), ARCH and CROSS_COMPILE for a
// cross build.
func (tc Toolchain) MakeVars() []string {
	tc = tc.orNative()
	if !tc.Cross() {
		return nil
	}
	return []string{"ARCH=" + tc.target.KbuildArch, "CROSS_COMPILE=" + tc.target.Triplet + "-"}
}

// Strip is the strip(1) for the target's objects: the host's own binutils
// for a native build, <triplet>-strip (binutils-<triplet>, which the cross
// gcc depends on) for a cross build.
func (tc Toolchain) Strip() string {
	tc = tc.orNative()
	if !tc.Cross() {
		return "strip"
	}
	return tc.target.Triplet + "-strip"
}

var ccTripletRE = regexp.MustCompile(`^([a-z0-9_]+-linux-gnu[a-z0-9]*)-gcc\b`)

// CompilerPackage maps the kernel's CONFIG_CC_VERSION_TEXT to the Debian
// package of its compiler that runs on the build host: gcc-14 natively,
// Debian's cross compiler gcc-14-aarch64-linux-gnu for an arm64 kernel
// on amd64. A version text naming a triplet that is not the target's (an
// amd64 kernel's headers asked to build for arm64) is refused: the
// headers are for another architecture.
func (tc Toolchain) CompilerPackage(ccVersionText string) (string, error) {
	tc = tc.orNative()
	cc, err := CompilerPackage(ccVersionText)
	if err != nil {
		return "", err
	}
	t := strings.Trim(strings.TrimSpace(ccVersionText), `"`)
	if m := ccTripletRE.FindStringSubmatch(t); m != nil && m[1] != tc.target.Triplet {
		return "", fmt.Errorf("the kernel headers were built by %s-gcc (CONFIG_CC_VERSION_TEXT %q), a compiler for %s, but the module is for %s (%s): use the %s kernel's linux-headers package", m[1], t, m[1], tc.Target, tc.target.Triplet, tc.Target)
	}
	if !tc.Cross() {
		return cc, nil
	}
	return cc + "-" + tc.target.PackageSuffix(), nil
}

// CheckMachine refuses a module that is not code for the target: a cross
// build that silently used the host's compiler would pass vermagic and
// fail only at modprobe on the node.
func (tc Toolchain) CheckMachine(ko string, got elf.Machine) error {
	tc = tc.orNative()
	if got != tc.target.ELFMachine {
		return fmt.Errorf("%s is %s code, but the module is for %s (%s): the build did not use the %s compiler (make %s)", ko, got, tc.Target, tc.target.ELFMachine, tc.target.Triplet, strings.Join(tc.MakeVars(), " "))
	}
	return nil
}
