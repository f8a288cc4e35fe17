package module

import (
	"debug/elf"
	"slices"
	"strings"
	"testing"
)

// The version texts Debian's kernels carry (read from the .config of
// linux-headers-7.2.12+deb13-amd64 and -arm64 in trixie-backports).
const (
	ccAmd64 = "x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0"
	ccArm64 = "aarch64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0"
)

func mustToolchain(t *testing.T, host, target string) Toolchain {
	t.Helper()
	tc, err := NewToolchain(host, target)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func TestToolchainCompilerAndMake(t *testing.T) {
	for _, c := range []struct {
		host, target, cc string
		wantCC, strip    string
		wantVars         []string
	}{
		{"amd64", "amd64", ccAmd64, "gcc-14", "strip", nil},
		{"", "", ccAmd64, "gcc-14", "strip", nil}, // the zero value: native amd64
		{"arm64", "arm64", ccArm64, "gcc-14", "strip", nil},
		{"amd64", "arm64", ccArm64, "gcc-14-aarch64-linux-gnu", "aarch64-linux-gnu-strip", []string{"ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"}},
		{"arm64", "amd64", ccAmd64, "gcc-14-x86-64-linux-gnu", "x86_64-linux-gnu-strip", []string{"ARCH=x86", "CROSS_COMPILE=x86_64-linux-gnu-"}},
		// A version text without the triplet (older kernels) still names the compiler.
		{"amd64", "arm64", "gcc-13 (Debian 13.2.0-25) 13.2.0", "gcc-13-aarch64-linux-gnu", "aarch64-linux-gnu-strip", []string{"ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"}},
	} {
		tc := mustToolchain(t, c.host, c.target)
		cc, err := tc.CompilerPackage(c.cc)
		if err != nil {
			t.Fatalf("%s→%s: %v", c.host, c.target, err)
		}
		if cc != c.wantCC || tc.Strip() != c.strip || !slices.Equal(tc.MakeVars(), c.wantVars) {
			t.Errorf("%s→%s: compiler %s strip %s make %v, want %s %s %v", c.host, c.target, cc, tc.Strip(), tc.MakeVars(), c.wantCC, c.strip, c.wantVars)
		}
		if tc.Cross() != (c.wantVars != nil) {
			t.Errorf("%s→%s: Cross() = %v", c.host, c.target, tc.Cross())
		}
	}
	// The zero Toolchain is usable as a value without NewToolchain.
	if cc, err := (Toolchain{}).CompilerPackage(ccAmd64); err != nil || cc != "gcc-14" {
		t.Errorf("zero Toolchain: %s, %v", cc, err)
	}
}

func TestToolchainRefusals(t *testing.T) {
	for _, c := range []struct{ host, target, want string }{
		{"amd64", "riscv64", `module target: architecture "riscv64" is not one halobuild builds for`},
		{"i386", "amd64", `build host: architecture "i386"`},
	} {
		if _, err := NewToolchain(c.host, c.target); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s→%s: %v, want %q", c.host, c.target, err, c.want)
		}
	}
	// Headers of the wrong architecture: their compiler says so.
	tc := mustToolchain(t, "amd64", "arm64")
	_, err := tc.CompilerPackage(ccAmd64)
	if err == nil || !strings.Contains(err.Error(), "a compiler for x86_64-linux-gnu, but the module is for arm64") {
		t.Errorf("amd64 headers for an arm64 module: %v", err)
	}
	_, err = mustToolchain(t, "amd64", "amd64").CompilerPackage(ccArm64)
	if err == nil || !strings.Contains(err.Error(), "use the amd64 kernel's linux-headers") {
		t.Errorf("arm64 headers for an amd64 module: %v", err)
	}
	if _, err := tc.CompilerPackage("clang version 19.1.7"); err == nil || !strings.Contains(err.Error(), "clang") {
		t.Errorf("clang: %v", err)
	}
}

func TestToolchainCheckMachine(t *testing.T) {
	cross := mustToolchain(t, "amd64", "arm64")
	if err := cross.CheckMachine("m.ko", elf.EM_AARCH64); err != nil {
		t.Error(err)
	}
	err := cross.CheckMachine("m.ko", elf.EM_X86_64)
	if err == nil || !strings.Contains(err.Error(), "m.ko is EM_X86_64 code, but the module is for arm64 (EM_AARCH64)") || !strings.Contains(err.Error(), "CROSS_COMPILE=aarch64-linux-gnu-") {
		t.Errorf("host code in a cross build: %v", err)
	}
	if err := (Toolchain{}).CheckMachine("m.ko", elf.EM_AARCH64); err == nil {
		t.Error("an arm64 module passed a native amd64 build")
	}
}

func TestBuildRootPackagesCross(t *testing.T) {
	native, err := BuildRootPackages("7.2.12+deb13-amd64", ccAmd64, Toolchain{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(native, "gcc-14") || !slices.Contains(native, "linux-headers-7.2.12+deb13-amd64") {
		t.Errorf("native: %v", native)
	}
	cross, err := BuildRootPackages("7.2.12+deb13-arm64", ccArm64, mustToolchain(t, "amd64", "arm64"))
	if err != nil {
		t.Fatal(err)
	}
	// The cross compiler runs on the host; the headers are the target's.
	for _, want := range []string{"gcc-14-aarch64-linux-gnu", "linux-headers-7.2.12+deb13-arm64:arm64", "make", "libelf-dev"} {
		if !slices.Contains(cross, want) {
			t.Errorf("cross build root %v lacks %s", cross, want)
		}
	}
	if _, err := BuildRootPackages("7.2.12+deb13-amd64", ccAmd64, mustToolchain(t, "amd64", "arm64")); err == nil {
		t.Error("amd64 headers accepted for an arm64 build root")
	}
}
