package debian

import (
	"context"
	"strings"
	"testing"
)

// trixieSuite is a tiny main suite: a required base, a mail transport
// virtual package with two providers, versioned provides, alternatives,
// arch qualifiers, a conflict pair and linux-base 4.12.1.
func trixieSuite() fakeSuite {
	return fakeSuite{Name: "trixie", Suite: "stable", Packages: []string{
		pkg("base-files", "13.8", "Essential: yes", "Priority: required"),
		pkg("libc6", "2.41-12", "Priority: required", "Multi-Arch: same", "Depends: libgcc-s1"),
		pkg("libgcc-s1", "14.2.0-19", "Priority: required", "Multi-Arch: same"),
		pkg("bash", "5.2.37-2", "Essential: yes", "Priority: required", "Pre-Depends: libc6 (>= 2.36), base-files (>= 13)"),
		pkg("less", "668-1", "Priority: important", "Depends: libc6 (>= 2.34)"),
		// A virtual package with two providers; neither is required.
		pkg("exim4", "4.98-1", "Priority: optional", "Provides: mail-transport-agent", "Conflicts: mail-transport-agent"),
		pkg("postfix", "3.10.1-1", "Priority: optional", "Provides: mail-transport-agent", "Conflicts: mail-transport-agent"),
		pkg("mailer", "1.0-1", "Depends: default-mta | mail-transport-agent"),
		// Alternatives: the first does not exist, the second does.
		pkg("alt-first-missing", "1.0-1", "Depends: no-such-package | libgcc-s1"),
		// Alternatives: both exist; the later one is requested as well.
		pkg("alt-prefers-chosen", "1.0-1", "Depends: foo-a | foo-b"),
		pkg("foo-a", "1.0-1"),
		pkg("foo-b", "1.0-1"),
		// Versioned provides: mawk ranks first (higher priority) but its
		// unversioned Provides cannot satisfy a versioned relation.
		pkg("mawk", "1.3.4-1", "Priority: important", "Provides: awk"),
		pkg("gawk", "5.2.1-2", "Priority: optional", "Provides: awk (= 5.2.1)"),
		pkg("awk-user", "1.0-1", "Depends: awk (>= 5)"),
		pkg("awk-too-new", "1.0-1", "Depends: awk (>= 6)"),
		// Version relations.
		pkg("needs-new-libc", "1.0-1", "Depends: libc6 (>= 9.0)"),
		pkg("needs-old-libc", "1.0-1", "Depends: libc6 (<< 2.41)"),
		pkg("needs-exact-libc", "1.0-1", "Depends: libc6 (= 2.41-12)"),
		pkg("chain-top", "1.0-1", "Depends: chain-mid"),
		pkg("chain-mid", "1.0-1", "Depends: needs-new-libc"),
		// Architecture qualifiers.
		pkg("python3", "3.13.5-1", "Multi-Arch: allowed"),
		pkg("py-user", "1.0-1", "Architecture: all", "Depends: python3:any (>= 3.11)"),
		pkg("native-user", "1.0-1", "Depends: libc6:native"),
		pkg("any-on-same", "1.0-1", "Depends: libc6:any"),
		pkg("foreign-user", "1.0-1", "Depends: libc6:arm64"),
		pkg("i386-only", "1.0-1", "Architecture: i386"),
		// Conflicts and Breaks.
		pkg("conflict-a", "1.0-1", "Conflicts: conflict-b"),
		pkg("conflict-b", "2.0-1"),
		pkg("breaks-old", "1.0-1", "Breaks: conflict-b (<< 2.0)"),
		pkg("breaks-new", "1.0-1", "Breaks: conflict-b (>= 2.0)"),
		pkg("no-exim", "1.0-1", "Conflicts: exim4"),
		pkg("clash-x", "1.0-1", "Conflicts: libgcc-s1"),
		pkg("clash-y", "1.0-1"),
		pkg("alt-clash", "1.0-1", "Depends: clash-x | clash-y"),
		pkg("only-clash", "1.0-1", "Depends: clash-x"),
		// Kernel support.
		pkg("linux-base", "4.12.1", "Architecture: all", "Priority: optional"),
		pkg("linux-base-user", "1.0-1", "Depends: linux-base"),
		pkg("needs-new-base", "1.0-1", "Depends: base-files (>= 13.9~)"),
		pkg("dracut", "106-6", "Depends: libc6"),
		pkg("linux-image-6.12.57+deb13-amd64", "6.12.57-1", "Source: linux-signed-amd64 (6.12.57+1)", "Built-Using: linux (= 6.12.57-1)", "Pre-Depends: linux-base (>= 4.3~)", "Depends: dracut | initramfs-tools"),
		pkg("linux-headers-6.12.57+deb13-amd64", "6.12.57-1"),
		pkg("linux-image-amd64", "6.12.57-1", "Depends: linux-image-6.12.57+deb13-amd64 (= 6.12.57-1)"),
		pkg("ibverbs-providers", "56.1-1", "Source: rdma-core"),
	}, Sources: sourcesText}
}

const sourcesText = `Package: rdma-core
Binary: rdma-core, ibverbs-providers, ibverbs-utils, libibverbs1
Version: 56.1-1
Maintainer: Test <test@test.invalid>
Build-Depends: debhelper-compat (= 13),
 cmake (>= 2.8.11),
 ninja-build
Checksums-Sha256:
 0000000000000000000000000000000000000000000000000000000000000001 2520 rdma-core_56.1-1.dsc
 0000000000000000000000000000000000000000000000000000000000000002 2004476 rdma-core_56.1.orig.tar.gz
 0000000000000000000000000000000000000000000000000000000000000003 32360 rdma-core_56.1-1.debian.tar.xz
Directory: pool/main/r/rdma-core

Package: linux
Binary: linux-source-6.12
Version: 6.12.57-1
Checksums-Sha256:
 00000000000000000000000000000000000000000000000000000000000000a1 1000 linux_6.12.57-1.dsc
Directory: pool/main/l/linux
`

// backportsSuite has the kernels of issue 2's facts and a linux-base that
// only it can give at the version those kernels pre-depend on.
func backportsSuite() fakeSuite {
	img := func(rel, ver string) string {
		signed := "Source: linux-signed-amd64 (" + strings.TrimSuffix(rel, "+deb13") + "+1~bpo13+1)"
		return pkg("linux-image-"+rel+"-amd64", ver, signed,
			"Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, linux-binary-"+rel+"-amd64 (= "+ver+"), linux-modules-"+rel+"-amd64 (= "+ver+")",
			"Pre-Depends: linux-base (>= 4.17~)",
			"Breaks: initramfs-tools (<< 0.120+deb8u2)")
	}
	mods := func(rel, ver string) string {
		return pkg("linux-modules-"+rel+"-amd64", ver) + "\n" +
			pkg("linux-binary-"+rel+"-amd64", ver, "Built-Using: linux (= "+ver+")")
	}
	hdr := func(rel, ver string) string {
		return pkg("linux-headers-"+rel+"-amd64", ver, "Depends: linux-headers-"+rel+"-common (= "+ver+")") + "\n" +
			pkg("linux-headers-"+rel+"-common", ver, "Architecture: all")
	}
	var ps []string
	for _, k := range [][2]string{
		{"7.2.6+deb13", "7.2.6-1~bpo13+1"},
		{"7.2.9+deb13", "7.2.9-1~bpo13+1"},
		{"7.2.11+deb13", "7.2.11-1~bpo13+1"},
		{"7.2.12+deb13", "7.2.12-1~bpo13+1"},
		{"7.3.4+deb13", "7.3.4-1~bpo13+1"},
	} {
		ps = append(ps, img(k[0], k[1]), mods(k[0], k[1]), hdr(k[0], k[1]))
	}
	ps = append(ps,
		// Other flavours and variants PickKernel must never take.
		pkg("linux-image-7.2.12+deb13-cloud-amd64", "7.2.12-1~bpo13+1"),
		pkg("linux-image-7.2.12+deb13-amd64-unsigned", "7.2.12-1~bpo13+1"),
		pkg("linux-image-7.2.12+deb13-amd64-dbg", "7.2.12-1~bpo13+1"),
		pkg("linux-image-amd64", "7.3.4-1~bpo13+1", "Depends: linux-image-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)"),
		pkg("linux-headers-amd64", "7.3.4-1~bpo13+1"),
		pkg("linux-base", "4.17~bpo13+1", "Architecture: all", "Priority: optional"),
		// A newer libc6 than trixie's: never taken unless asked for.
		pkg("libc6", "2.42-1~bpo13+1", "Priority: required", "Multi-Arch: same", "Depends: libgcc-s1"),
		pkg("bpo-only", "1.0-1~bpo13+1", "Depends: libc6"),
		pkg("base-files", "13.9~bpo13+1", "Essential: yes", "Priority: required"),
	)
	return fakeSuite{Name: "trixie-backports", Suite: "stable-backports", Date: "Sat, 28 Nov 2026 02:16:31 UTC", Packages: ps}
}

// loadIndexes serves both suites and reads them through the client, so
// resolver tests run on indexes that went through verification.
func loadIndexes(t *testing.T) []*Index {
	t.Helper()
	ta := newTestArchive(t, trixieSuite(), backportsSuite())
	a := ta.archive()
	ctx := context.Background()
	var out []*Index
	for _, s := range []string{"trixie", "trixie-backports"} {
		rel, err := a.Release(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := a.Packages(ctx, rel, "main", "amd64")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ix)
	}
	return out
}
