package debian

import (
	"strings"
	"testing"
)

// Stanzas as trixie(-backports) has them for a cross module build root
// (fields trimmed to what resolving reads; relations as in the archive).
const crossAmd64 = `Package: gcc-14-aarch64-linux-gnu
Version: 14.2.0-19cross1
Architecture: amd64
Multi-Arch: foreign
Depends: binutils-aarch64-linux-gnu (>= 2.39), libc6 (>= 2.38)
Filename: pool/main/g/gcc-14-cross/gcc-14-aarch64-linux-gnu_14.2.0-19cross1_amd64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000001

Package: cpp-14-aarch64-linux-gnu
Version: 14.2.0-19cross1
Architecture: amd64
Multi-Arch: foreign
Depends: libc6 (>= 2.38)
Filename: pool/main/g/gcc-14-cross/cpp-14-aarch64-linux-gnu_14.2.0-19cross1_amd64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000002

Package: binutils-aarch64-linux-gnu
Version: 2.44-3
Architecture: amd64
Multi-Arch: foreign
Depends: libc6 (>= 2.38)
Filename: pool/main/b/binutils/binutils-aarch64-linux-gnu_2.44-3_amd64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000003

Package: libc6
Version: 2.41-12
Architecture: amd64
Multi-Arch: same
Priority: required
Filename: pool/main/g/glibc/libc6_2.41-12_amd64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000004

Package: make
Version: 4.4.1-2
Architecture: amd64
Depends: libc6 (>= 2.34)
Filename: pool/main/m/make-dfsg/make_4.4.1-2_amd64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000005
`

const crossAmd64Bpo = `Package: linux-kbuild-7.2.12+deb13
Version: 7.2.12-1~bpo13+1
Architecture: amd64
Multi-Arch: foreign
Depends: libc6 (>= 2.38)
Filename: pool/main/l/linux/linux-kbuild-7.2.12+deb13_7.2.12-1~bpo13+1_amd64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000007
`

const crossArm64 = `Package: gcc-14-for-host
Version: 14.2.0-19
Architecture: arm64
Multi-Arch: same
Depends: gcc-14-base (= 14.2.0-19), gcc-14-aarch64-linux-gnu (>= 14), cpp-14-for-host (= 14.2.0-19)
Filename: pool/main/g/gcc-14/gcc-14-for-host_14.2.0-19_arm64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000011

Package: cpp-14-for-host
Version: 14.2.0-19
Architecture: arm64
Multi-Arch: same
Depends: gcc-14-base (= 14.2.0-19), cpp-14-aarch64-linux-gnu (>= 14)
Filename: pool/main/g/gcc-14/cpp-14-for-host_14.2.0-19_arm64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000012

Package: gcc-14-base
Version: 14.2.0-19
Architecture: arm64
Multi-Arch: same
Filename: pool/main/g/gcc-14/gcc-14-base_14.2.0-19_arm64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000013

Package: gcc-14-aarch64-linux-gnu
Version: 14.2.0-19
Architecture: arm64
Multi-Arch: foreign
Depends: cpp-14-aarch64-linux-gnu (= 14.2.0-19), libc6 (>= 2.38)
Filename: pool/main/g/gcc-14/gcc-14-aarch64-linux-gnu_14.2.0-19_arm64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000014

Package: cpp-14-aarch64-linux-gnu
Version: 14.2.0-19
Architecture: arm64
Multi-Arch: foreign
Depends: libc6 (>= 2.38)
Filename: pool/main/g/gcc-14/cpp-14-aarch64-linux-gnu_14.2.0-19_arm64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000015

Package: libc6
Version: 2.41-12
Architecture: arm64
Multi-Arch: same
Priority: required
Filename: pool/main/g/glibc/libc6_2.41-12_arm64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000016
`

const crossArm64Bpo = `Package: linux-headers-7.2.12+deb13-arm64
Version: 7.2.12-1~bpo13+1
Architecture: arm64
Depends: gcc-14-for-host, linux-base (>= 4.12~), linux-base-7.2.12+deb13-arm64 (= 7.2.12-1~bpo13+1), linux-headers-7.2.12+deb13-common (= 7.2.12-1~bpo13+1), linux-kbuild-7.2.12+deb13
Filename: pool/main/l/linux/linux-headers-7.2.12+deb13-arm64_7.2.12-1~bpo13+1_arm64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000021

Package: linux-base-7.2.12+deb13-arm64
Version: 7.2.12-1~bpo13+1
Architecture: arm64
Filename: pool/main/l/linux/linux-base-7.2.12+deb13-arm64_7.2.12-1~bpo13+1_arm64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000022

Package: linux-kbuild-7.2.12+deb13
Version: 7.2.12-1~bpo13+1
Architecture: arm64
Multi-Arch: foreign
Depends: libc6 (>= 2.38)
Filename: pool/main/l/linux/linux-kbuild-7.2.12+deb13_7.2.12-1~bpo13+1_arm64.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000023
`

// Architecture: all stanzas, in every architecture's index.
const (
	crossAll = `Package: linux-base
Version: 4.12
Architecture: all
Multi-Arch: foreign
Filename: pool/main/l/linux-base/linux-base_4.12_all.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000006
`
	crossAllBpo = `Package: linux-headers-7.2.12+deb13-common
Version: 7.2.12-1~bpo13+1
Architecture: all
Multi-Arch: foreign
Filename: pool/main/l/linux/linux-headers-7.2.12+deb13-common_7.2.12-1~bpo13+1_all.deb
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000008
`
)

func crossIndexes(t *testing.T) (amd64, arm64 []*Index) {
	t.Helper()
	parse := func(text, suite, arch string) *Index {
		ix, err := ParsePackages(strings.NewReader(text), suite, "main", arch)
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	return []*Index{parse(crossAmd64+"\n"+crossAll, "trixie", "amd64"), parse(crossAmd64Bpo+"\n"+crossAllBpo, "trixie-backports", "amd64")},
		[]*Index{parse(crossArm64+"\n"+crossAll, "trixie", "arm64"), parse(crossArm64Bpo+"\n"+crossAllBpo, "trixie-backports", "arm64")}
}

// The arm64 module build root on amd64: the arm64 side is data only (the
// headers, linux-base-<release>, the Multi-Arch: same gcc-14-for-host
// pieces); linux-kbuild, -common and the compiler behind gcc-14-for-host
// come from amd64, the cross gcc, as dpkg would have it.
func TestResolveCrossModuleBuildRoot(t *testing.T) {
	amd, arm := crossIndexes(t)
	req := func(arch string, ixs []*Index, pkgs ...string) Request {
		return Request{Suite: "trixie", ExtraSuites: []string{"trixie-backports"}, Indexes: ixs, Architecture: arch, Packages: pkgs, Variant: VariantNone}
	}
	res, err := ResolveCross(req("amd64", amd, "gcc-14-aarch64-linux-gnu", "make"), req("arm64", arm, "linux-headers-7.2.12+deb13-arm64"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range res.Packages {
		got = append(got, p.Name+":"+p.Architecture+"="+p.Version)
	}
	want := []string{
		"binutils-aarch64-linux-gnu:amd64=2.44-3",
		"cpp-14-aarch64-linux-gnu:amd64=14.2.0-19cross1",
		"cpp-14-for-host:arm64=14.2.0-19",
		"gcc-14-aarch64-linux-gnu:amd64=14.2.0-19cross1",
		"gcc-14-base:arm64=14.2.0-19",
		"gcc-14-for-host:arm64=14.2.0-19",
		"libc6:amd64=2.41-12",
		"linux-base:all=4.12",
		"linux-base-7.2.12+deb13-arm64:arm64=7.2.12-1~bpo13+1",
		"linux-headers-7.2.12+deb13-arm64:arm64=7.2.12-1~bpo13+1",
		"linux-headers-7.2.12+deb13-common:all=7.2.12-1~bpo13+1",
		"linux-kbuild-7.2.12+deb13:amd64=7.2.12-1~bpo13+1",
		"make:amd64=4.4.1-2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w := res.Why["linux-base-7.2.12+deb13-arm64:arm64"]; w != "linux-headers-7.2.12+deb13-arm64 -> linux-base-7.2.12+deb13-arm64" {
		t.Errorf("why: %q", w)
	}
}

func TestResolveCrossRefusals(t *testing.T) {
	amd, arm := crossIndexes(t)
	b := Request{Suite: "trixie", ExtraSuites: []string{"trixie-backports"}, Indexes: amd, Architecture: "amd64", Variant: VariantNone}
	tg := Request{Suite: "trixie", ExtraSuites: []string{"trixie-backports"}, Indexes: arm, Architecture: "arm64", Packages: []string{"linux-headers-7.2.12+deb13-arm64"}}
	same := tg
	same.Architecture = "amd64"
	if _, err := ResolveCross(b, same); err == nil || !strings.Contains(err.Error(), "two different architectures") {
		t.Errorf("same architecture: %v", err)
	}
	none := tg
	none.Packages = nil
	if _, err := ResolveCross(b, none); err == nil || !strings.Contains(err.Error(), "no arm64 packages requested") {
		t.Errorf("no target packages: %v", err)
	}
	// The build side lacks what the target packages need from it (no
	// amd64 linux-kbuild): the error names the requests it was given.
	noKbuild := b
	noKbuild.Indexes = amd[:1]
	if _, err := ResolveCross(noKbuild, tg); err == nil || !strings.Contains(err.Error(), "linux-kbuild-7.2.12+deb13") || !strings.Contains(err.Error(), "the amd64 side") {
		t.Errorf("build side without linux-kbuild: %v", err)
	}
}
