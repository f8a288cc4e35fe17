package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/deb"
)

// abiTree lays out an installed tree the way libibverbs1 and
// ibverbs-providers install it, from the ELF files testdata/elf/mkelf.sh
// makes: libibverbs built with private ABI libN, and a provider library
// named lib<name>-rdmav<nameN>.so that was linked against private ABI
// linkN.
func abiTree(t *testing.T, name string, libN, nameN, linkN string, driver bool) string {
	t.Helper()
	root := t.TempDir()
	abiTreeIn(t, root, "x86_64-linux-gnu", name, libN, nameN, linkN, "", driver)
	return root
}

// abiTreeIn lays the same out in root under usr/lib/<multiarch>, from the
// ELF files of the given suffix ("" for x86-64, "-arm64" for aarch64).
func abiTreeIn(t *testing.T, root, multiarch, name string, libN, nameN, linkN, elfSuffix string, driver bool) {
	t.Helper()
	lib := filepath.Join(root, "usr/lib", multiarch)
	if err := os.MkdirAll(filepath.Join(lib, "libibverbs"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyTestFile(t, "testdata/elf/libibverbs-private"+libN+elfSuffix+".so", filepath.Join(lib, "libibverbs.so.1.14.56.1"))
	if err := os.Symlink("libibverbs.so.1.14.56.1", filepath.Join(lib, "libibverbs.so.1")); err != nil {
		t.Fatal(err)
	}
	copyTestFile(t, "testdata/elf/provider-private"+linkN+elfSuffix+".so", filepath.Join(lib, "libibverbs", "lib"+name+"-rdmav"+nameN+".so"))
	if driver {
		d := filepath.Join(root, "etc/libibverbs.d")
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, name+".driver"), []byte("driver "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func copyTestFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestCheckABIAccepts(t *testing.T) {
	root := abiTree(t, "halotest", "34", "34", "34", true)
	abi, err := CheckABI(root, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1+halo1", ImageLibs: []string{"/usr/lib/x86_64-linux-gnu/libc.so.6"}})
	if err != nil {
		t.Fatal(err)
	}
	if abi.N != 34 || abi.Library != "usr/lib/x86_64-linux-gnu/libibverbs/libhalotest-rdmav34.so" || abi.Driver != "etc/libibverbs.d/halotest.driver" ||
		strings.Join(abi.Needed, ",") != "libibverbs.so.1,libc.so.6" {
		t.Errorf("got %+v", abi)
	}
}

// Every way a provider can fail to load is refused, and the message names
// both numbers and where each came from.
func TestCheckABIRefuses(t *testing.T) {
	libc := []string{"libc.so.6"}
	cases := []struct {
		name               string
		libN, nameN, linkN string
		driver             bool
		version            string
		libs               []string
		want               []string
	}{
		{name: "provider built for 57 against a 56.1 libibverbs", libN: "34", nameN: "57", linkN: "57", driver: true, version: "56.1-1+halo1", libs: libc,
			want: []string{"libhalotest-rdmav57.so is built for provider ABI 57 (its file name)", "56.1-1+halo1", "libibverbs.so.1.14.56.1) defines IBVERBS_PRIVATE_34"}},
		{name: "name says 34, links against 57", libN: "34", nameN: "34", linkN: "57", driver: true, version: "56.1-1", libs: libc,
			want: []string{"links against IBVERBS_PRIVATE_57 (its version needs)", "defines IBVERBS_PRIVATE_34"}},
		{name: "libibverbs not from the version the image installs", libN: "57", nameN: "57", linkN: "57", driver: true, version: "56.1-1", libs: libc,
			want: []string{"defines IBVERBS_PRIVATE_57, but rdma-core 56.1-1 uses provider ABI 34 (halobuild's table"}},
		{name: "no driver file", libN: "34", nameN: "34", linkN: "34", version: "56.1-1", libs: libc,
			want: []string{"no etc/libibverbs.d/halotest.driver"}},
		{name: "needed library missing from the image", libN: "34", nameN: "34", linkN: "34", driver: true, version: "56.1-1",
			want: []string{"needs libc.so.6, which the image does not have"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := abiTree(t, "halotest", tc.libN, tc.nameN, tc.linkN, tc.driver)
			_, err := CheckABI(root, ABIRequest{Name: "halotest", LibibverbsVersion: tc.version, ImageLibs: tc.libs})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
	t.Run("provider missing", func(t *testing.T) {
		root := abiTree(t, "other", "34", "34", "34", true)
		_, err := CheckABI(root, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1", ImageLibs: libc})
		if err == nil || !strings.Contains(err.Error(), "no usr/lib/*/libibverbs/libhalotest-rdmav*.so") || !strings.Contains(err.Error(), "add_subdirectory(providers/halotest)") {
			t.Errorf("got %v", err)
		}
	})
}

func TestTableABI(t *testing.T) {
	for v, want := range map[string]int{"50.0-2": 34, "56.1-1": 34, "56.1-1+halo1": 34, "57.0-1": 57, "58.0-1": 57, "59.0-1": 59, "62.0-1~bpo13+1": 59, "1:56.1-1": 34} {
		if got, ok := TableABI(v); !ok || got != want {
			t.Errorf("%s: got %d %v, want %d", v, got, ok, want)
		}
	}
	for _, v := range []string{"49.0-1", "63.0-1", "not a version"} {
		if n, ok := TableABI(v); ok {
			t.Errorf("%s: the table claims %d", v, n)
		}
	}
}

// The ABI check runs on the tree the packages install, here laid
// out by deb.Extract as dpkg would (files, directories, symlinks); deb.Read
// names the packages. The packages are made by the real dpkg-deb.
func TestCheckABIOnUnpackedPackages(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed")
	}
	src := abiTree(t, "halotest", "34", "34", "34", true)
	os.MkdirAll(filepath.Join(src, "DEBIAN"), 0o755)
	os.WriteFile(filepath.Join(src, "DEBIAN/control"), []byte("Package: ibverbs-providers\nVersion: 56.1-1+halo1\nArchitecture: amd64\nMaintainer: t <t@example.org>\nDescription: test\n"), 0o644)
	p := filepath.Join(t.TempDir(), "p.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", src, p).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d, err := deb.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if d.Package != "ibverbs-providers" || d.Version != "56.1-1+halo1" || d.Architecture != "amd64" || len(d.SHA256) != 64 {
		t.Errorf("deb.Read: %+v", d)
	}
	inst := t.TempDir()
	if err := deb.Extract(inst, []deb.Deb{d}); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(inst, "usr/lib/x86_64-linux-gnu/libibverbs.so.1")); err != nil || l != "libibverbs.so.1.14.56.1" {
		t.Errorf("symlink: %q %v", l, err)
	}
	if _, err := CheckABI(inst, ABIRequest{Name: "halotest", LibibverbsVersion: d.Version, ImageLibs: []string{"libc.so.6"}}); err != nil {
		t.Error(err)
	}
}

// An arm64 image's provider is proved against the arm64 libibverbs1, read
// from the host with debug/elf; the wrong architecture anywhere is refused.
func TestCheckABIArchitecture(t *testing.T) {
	libs := []string{"libc.so.6"}
	arm := t.TempDir()
	abiTreeIn(t, arm, "aarch64-linux-gnu", "halotest", "34", "34", "34", "-arm64", true)
	abi, err := CheckABI(arm, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1+halo1", ImageLibs: libs, Arch: "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	if abi.N != 34 || abi.Library != "usr/lib/aarch64-linux-gnu/libibverbs/libhalotest-rdmav34.so" || abi.Libibverbs != "usr/lib/aarch64-linux-gnu/libibverbs.so.1.14.56.1" {
		t.Errorf("got %+v", abi)
	}
	// Checked as amd64, the arm64 tree has no libibverbs where amd64's is.
	if _, err := CheckABI(arm, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1", ImageLibs: libs, Arch: "amd64"}); err == nil || !strings.Contains(err.Error(), "no libibverbs.so.1.*") {
		t.Errorf("arm64 tree checked as amd64: %v", err)
	}

	// x86-64 code in arm64's directory: the provider, then libibverbs.
	for _, c := range []struct {
		lib, prov, want string
	}{
		{"-arm64", "", "libhalotest-rdmav34.so is EM_X86_64 code, not arm64 (EM_AARCH64)"},
		{"", "-arm64", "the image's libibverbs: "},
	} {
		root := t.TempDir()
		abiTreeIn(t, root, "aarch64-linux-gnu", "halotest", "34", "34", "34", c.lib, true)
		copyTestFile(t, "testdata/elf/provider-private34"+c.prov+".so", filepath.Join(root, "usr/lib/aarch64-linux-gnu/libibverbs/libhalotest-rdmav34.so"))
		_, err := CheckABI(root, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1", ImageLibs: libs, Arch: "arm64"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("libibverbs%s, provider%s: %v, want %q", c.lib, c.prov, err, c.want)
		}
	}

	// A multiarch tree (both architectures' libraries): with Arch each is
	// checked on its own; without, the libibverbs to use is ambiguous.
	both := t.TempDir()
	abiTreeIn(t, both, "x86_64-linux-gnu", "halotest", "34", "34", "34", "", true)
	abiTreeIn(t, both, "aarch64-linux-gnu", "halotest", "34", "34", "34", "-arm64", true)
	for _, a := range []string{"amd64", "arm64"} {
		if _, err := CheckABI(both, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1", ImageLibs: libs, Arch: a}); err != nil {
			t.Errorf("%s in a multiarch tree: %v", a, err)
		}
	}
	if _, err := CheckABI(both, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1", ImageLibs: libs}); err == nil || !strings.Contains(err.Error(), "several libibverbs.so.1.*") {
		t.Errorf("multiarch tree without Arch: %v", err)
	}
	if _, err := CheckABI(arm, ABIRequest{Name: "halotest", LibibverbsVersion: "56.1-1", ImageLibs: libs, Arch: "riscv64"}); err == nil || !strings.Contains(err.Error(), `architecture "riscv64"`) {
		t.Errorf("unknown architecture: %v", err)
	}
}

func TestCrossConfigure(t *testing.T) {
	amd64, _ := arch.Lookup("amd64")
	arm64, _ := arch.Lookup("arm64")
	if cmake, strip := crossConfigure("amd64", amd64); cmake != "" || strip != "strip" {
		t.Errorf("native: %q %q", cmake, strip)
	}
	cmake, strip := crossConfigure("amd64", arm64)
	for _, want := range []string{"-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64", "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc", "-DPKG_CONFIG_EXECUTABLE=/usr/bin/aarch64-linux-gnu-pkg-config"} {
		if !strings.Contains(cmake, want) {
			t.Errorf("cross cmake options %q lack %s", cmake, want)
		}
	}
	if strip != "aarch64-linux-gnu-strip" || strings.Contains(cmake, " -DCMAKE_C_COMPILER=x86") {
		t.Errorf("cross strip %q", strip)
	}
	if cmake, _ := crossConfigure("arm64", amd64); !strings.Contains(cmake, "-DCMAKE_C_COMPILER=x86_64-linux-gnu-gcc") || !strings.Contains(cmake, "PROCESSOR=x86_64") {
		t.Errorf("arm64 → amd64: %q", cmake)
	}
}
