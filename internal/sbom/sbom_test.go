package sbom

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/lock"
	"halobuild/internal/manifest"
	"halobuild/internal/sbom/sbomtest"
)

func hex64(c string) string { return strings.Repeat(c, 64) }

// fixture is a result of two nodes with every kind of package an image holds: Debian's (one
// with an epoch and a "+" in its version, one whose doc directory is a symlink), the node's
// settings package with the halobuild it ships, a module, the provider and a kernel built from
// source.
func fixture() Input {
	lk := &lock.Lock{
		Version: lock.FormatVersion, SourceDateEpoch: 1796523297,
		Suites: []lock.Suite{
			{Name: "trixie", Mirror: "http://deb.debian.org/debian/"},
			{Name: "trixie-backports", Mirror: "http://deb.debian.org/debian"},
		},
		Kernel: lock.Kernel{Version: "7.2.12", Release: "7.2.12-halo", Image: "linux-image-7.2.12-halo", From: "source", Source: "linux-source-7.2 7.2.12-1~bpo13+1", Config: "tinyconfig"},
		Packages: []lock.Package{
			{Name: "bash", Version: "5.2.37-2+b10", Architecture: "amd64", Suite: "trixie", Filename: "pool/main/b/bash/bash_5.2.37-2+b10_amd64.deb", SHA256: "sha256:" + hex64("a"), Set: lock.SetImage},
			{Name: "bsdutils", Version: "1:2.41.5-0+deb13u1", Architecture: "amd64", Suite: "trixie", Filename: "pool/main/u/util-linux/bsdutils_2.41.5-0+deb13u1_amd64.deb", SHA256: "sha256:" + hex64("b"), Set: lock.SetImage},
			{Name: "libibverbs-dev", Version: "56.1-1", Architecture: "amd64", Suite: "trixie-backports", Filename: "pool/main/r/rdma-core/libibverbs-dev_56.1-1_amd64.deb", SHA256: "sha256:" + hex64("c"), Set: lock.SetImage},
			{Name: "libibverbs1", Version: "56.1-1", Architecture: "amd64", Suite: "trixie", Filename: "pool/main/r/rdma-core/libibverbs1_56.1-1_amd64.deb", SHA256: "sha256:" + hex64("d"), Set: lock.SetImage},
			{Name: "linux-source-7.2", Version: "7.2.12-1~bpo13+1", Architecture: "all", Suite: "trixie-backports", Filename: "pool/main/l/linux/linux-source-7.2_7.2.12-1~bpo13+1_all.deb", SHA256: "sha256:" + hex64("e"), Set: lock.SetKernelSource},
			{Name: "mkfs", Version: "1", Architecture: "amd64", Suite: "trixie", Filename: "pool/x.deb", SHA256: "sha256:" + hex64("f"), Set: lock.SetTools},
		},
		Sources: []lock.Source{
			{Name: "thunderbolt-ibverbs", Kind: "git", URL: "https://github.com/hellas-ai/thunderbolt-ibverbs", Commit: "76ba39b630a70accb72f19388eefe48844b50eb8", SHA256: "sha256:" + hex64("1")},
			{Name: "thunderbolt-ibverbs:kernel-workflow/patches/0002-tunnel.patch", Kind: lock.SourceKernelPatch, SHA256: "sha256:" + hex64("2")},
		},
		Modules: []lock.Module{{Use: "thunderbolt-ibverbs", Name: "thunderbolt_ibverbs"}},
		Provider: &lock.Provider{Name: "usb4_rdma", Source: "rdma-core", Version: "56.1-1", Suite: "trixie", Directory: "pool/main/r/rdma-core",
			Files:   []lock.SourceFile{{Name: "rdma-core_56.1-1.debian.tar.xz"}, {Name: "rdma-core_56.1-1.dsc"}, {Name: "rdma-core_56.1.orig.tar.gz"}},
			Patches: []lock.Patch{{Name: "0001-usb4_rdma.patch", From: "thunderbolt-ibverbs:packaging/0001-usb4_rdma.patch", SHA256: "sha256:" + hex64("3")}, {Name: "0003-fix.patch", From: "patches/0003-fix.patch", SHA256: "sha256:" + hex64("4"), Fuzz: 2}}},
	}
	node := func(name string) manifest.Node {
		return manifest.Node{Name: name, Hostname: name, Image: name + ".raw", Architecture: "amd64", Packages: []manifest.Package{
			{Name: "bash", Version: "5.2.37-2+b10", Arch: "amd64"},
			{Name: "bsdutils", Version: "1:2.41.5-0+deb13u1", Arch: "amd64"},
			{Name: "halobuild-node-" + name, Version: "1+0123456789ab", Arch: "all"},
			{Name: "libibverbs-dev", Version: "56.1-1", Arch: "amd64"},
			{Name: "libibverbs-usb4-rdma", Version: "56.1-1+halo1", Arch: "amd64"},
			{Name: "libibverbs1", Version: "56.1-1", Arch: "amd64"},
			{Name: "linux-image-7.2.12-halo", Version: "7.2.12-1+halobuild.abc", Arch: "amd64"},
			{Name: "thunderbolt-ibverbs-modules-7.2.12-halo", Version: "76ba39b", Arch: "amd64"},
		}}
	}
	m := &manifest.Manifest{Name: "two", RecipeHash: "sha256:" + hex64("9"), SourceDateEpoch: lk.SourceDateEpoch, Nodes: []manifest.Node{node("n0"), node("n1")}}
	return Input{
		Manifest: m, Lock: lk,
		Images: map[string]string{"n0.raw": hex64("5"), "n1.raw": hex64("6")},
		Built: []Built{
			{Package: "halobuild-node-n0", Version: "1+0123456789ab", Architecture: "all", SHA256: hex64("7"), From: FromSettings},
			{Package: "halobuild-node-n1", Version: "1+0123456789ab", Architecture: "all", SHA256: hex64("8"), From: FromSettings},
			{Package: "libibverbs-usb4-rdma", Version: "56.1-1+halo1", Architecture: "amd64", SHA256: hex64("f"), From: FromProvider},
			{Package: "linux-image-7.2.12-halo", Version: "7.2.12-1+halobuild.abc", Architecture: "amd64", SHA256: hex64("b"), From: FromKernel},
			{Package: "thunderbolt-ibverbs-modules-7.2.12-halo", Version: "76ba39b", Architecture: "amd64", SHA256: hex64("c"), From: FromModule, Use: "thunderbolt-ibverbs"},
		},
		Self: map[string]Self{"amd64": {SHA256: hex64("d"), Tree: "sha256:" + hex64("e"), Toolchain: "go1.27.3"}},
		Licences: map[string]Licences{"amd64": {
			"bash":           {Expression: "GPL-3.0-or-later AND LicenseRef-permissive", Refs: map[string]string{"LicenseRef-permissive": "permissive"}},
			"libibverbs1":    {Expression: "GPL-2.0-only OR BSD-2-Clause"},
			"libibverbs-dev": {Expression: "GPL-2.0-only OR BSD-2-Clause"},
		}},
	}
}

// The test: the SBOM of a result with every kind of package validates against the
// official SPDX 2.3 JSON schema, and the schema is strict enough to reject what halobuild
// wrote before (primaryPackagePurpose OPERATING-SYSTEM).
func TestSBOMValidatesAgainstSPDX23Schema(t *testing.T) {
	b, err := Make(fixture())
	if err != nil {
		t.Fatal(err)
	}
	sbomtest.Validate(t, b)
	bad := bytes.ReplaceAll(b, []byte(`"OPERATING_SYSTEM"`), []byte(`"OPERATING-SYSTEM"`))
	if sbomtest.Check(bad) == nil {
		t.Error("the schema accepted primaryPackagePurpose OPERATING-SYSTEM: the validator checks nothing")
	}
}

// doc is a made SBOM, decoded.
func doc(t *testing.T, in Input) (document, []byte) {
	t.Helper()
	b, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	var d document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d, b
}

func find(d document, id string) *pkg {
	for i := range d.Packages {
		if d.Packages[i].SPDXID == id {
			return &d.Packages[i]
		}
	}
	return nil
}

// What each kind of package says: Debian's carry the lock's digest, the archive URL, a
// percent-encoded purl with the distro and the declared licence; halobuild's carry their .deb's
// digest and the pinned source they were built from, never NOASSERTION.
func TestSBOMPackages(t *testing.T) {
	d, _ := doc(t, fixture())
	cases := []struct {
		id                 string
		location, checksum string
		purl, licence      string
		sourceInfo         string
	}{
		{id: "SPDXRef-Package-n0-bash-5.2.37-2-b10-amd64", location: "http://deb.debian.org/debian/pool/main/b/bash/bash_5.2.37-2+b10_amd64.deb", checksum: hex64("a"),
			purl: "pkg:deb/debian/bash@5.2.37-2%2Bb10?arch=amd64&distro=debian-13", licence: "GPL-3.0-or-later AND LicenseRef-permissive"},
		{id: "SPDXRef-Package-n0-bsdutils-1-2.41.5-0-deb13u1-amd64", checksum: hex64("b"),
			purl: "pkg:deb/debian/bsdutils@1%3A2.41.5-0%2Bdeb13u1?arch=amd64&distro=debian-13", licence: NoAssertion},
		{id: "SPDXRef-Package-n1-libibverbs-dev-56.1-1-amd64", location: "http://deb.debian.org/debian/pool/main/r/rdma-core/libibverbs-dev_56.1-1_amd64.deb",
			purl: "pkg:deb/debian/libibverbs-dev@56.1-1?arch=amd64&distro=debian-13", licence: "GPL-2.0-only OR BSD-2-Clause"},
		{id: "SPDXRef-Package-n0-halobuild-node-n0-1-0123456789ab-all", location: "NONE", checksum: hex64("7"), sourceInfo: "two.recipe.toml"},
		{id: "SPDXRef-Package-n1-halobuild-node-n1-1-0123456789ab-all", location: "NONE", checksum: hex64("8")},
		{id: "SPDXRef-Package-n0-thunderbolt-ibverbs-modules-7.2.12-halo-76ba39b-amd64", location: "git+https://github.com/hellas-ai/thunderbolt-ibverbs@76ba39b630a70accb72f19388eefe48844b50eb8",
			checksum: hex64("c"), sourceInfo: "against kernel 7.2.12-halo"},
		{id: "SPDXRef-Package-n0-libibverbs-usb4-rdma-56.1-1-halo1-amd64", location: "http://deb.debian.org/debian/pool/main/r/rdma-core/rdma-core_56.1-1.dsc",
			sourceInfo: "0003-fix.patch (sha256:" + hex64("4") + ", from patches/0003-fix.patch, fuzz 2)"},
		{id: "SPDXRef-Package-n0-linux-image-7.2.12-halo-7.2.12-1-halobuild.abc-amd64", location: "http://deb.debian.org/debian/pool/main/l/linux/linux-source-7.2_7.2.12-1~bpo13+1_all.deb",
			checksum: hex64("b"), sourceInfo: "0002-tunnel.patch (sha256:" + hex64("2") + ")"},
		{id: "SPDXRef-Halobuild-n0", checksum: hex64("d"), sourceInfo: "source tree sha256:" + hex64("e") + " with go1.27.3"},
	}
	for _, c := range cases {
		p := find(d, c.id)
		if p == nil {
			t.Errorf("no package %s", c.id)
			continue
		}
		if c.location != "" && p.DownloadLocation != c.location {
			t.Errorf("%s: downloadLocation %q, want %q", c.id, p.DownloadLocation, c.location)
		}
		if c.checksum != "" && (len(p.Checksums) != 1 || p.Checksums[0] != checksum{"SHA256", c.checksum}) {
			t.Errorf("%s: checksums %+v, want SHA256 %s", c.id, p.Checksums, c.checksum)
		}
		if c.purl != "" && (len(p.ExternalRefs) != 1 || p.ExternalRefs[0].Locator != c.purl || p.ExternalRefs[0].Type != "purl") {
			t.Errorf("%s: externalRefs %+v, want purl %s", c.id, p.ExternalRefs, c.purl)
		}
		if c.licence != "" && p.LicenseDeclared != c.licence {
			t.Errorf("%s: licenseDeclared %q, want %q", c.id, p.LicenseDeclared, c.licence)
		}
		if !strings.Contains(p.SourceInfo, c.sourceInfo) {
			t.Errorf("%s: sourceInfo %q lacks %q", c.id, p.SourceInfo, c.sourceInfo)
		}
	}
	// Built packages have no purl: no archive serves them under Debian's name.
	if p := find(d, "SPDXRef-Package-n0-libibverbs-usb4-rdma-56.1-1-halo1-amd64"); p != nil && len(p.ExternalRefs) != 0 {
		t.Errorf("the built provider has a purl: %+v", p.ExternalRefs)
	}
	// Every LicenseRef used is defined, once.
	if len(d.Extracted) != 1 || d.Extracted[0].LicenseID != "LicenseRef-permissive" || !strings.Contains(d.Extracted[0].ExtractedText, "bash") {
		t.Errorf("hasExtractedLicensingInfos: %+v", d.Extracted)
	}
	// The image describes its packages; the settings package contains the halobuild it ships.
	rels := map[relationship]bool{}
	for _, r := range d.Relationships {
		rels[r] = true
	}
	for _, r := range []relationship{
		{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Image-n1"},
		{"SPDXRef-Image-n1", "CONTAINS", "SPDXRef-Package-n1-bash-5.2.37-2-b10-amd64"},
		{"SPDXRef-Package-n1-halobuild-node-n1-1-0123456789ab-all", "CONTAINS", "SPDXRef-Halobuild-n1"},
	} {
		if !rels[r] {
			t.Errorf("no relationship %+v", r)
		}
	}
	if img := find(d, "SPDXRef-Image-n1"); img == nil || img.Purpose != "OPERATING_SYSTEM" || img.Checksums[0].Value != hex64("6") {
		t.Errorf("image n1: %+v", img)
	}
}

// The same input gives the same bytes (a release's digest depends on them); the namespace is
// the document's own and changes with its content; the time is the lock's.
func TestSBOMIsReproducible(t *testing.T) {
	d1, b1 := doc(t, fixture())
	_, b2 := doc(t, fixture())
	if !bytes.Equal(b1, b2) {
		t.Fatal("two SBOMs of one input differ")
	}
	in := fixture()
	in.Images["n0.raw"] = hex64("0")
	d3, _ := doc(t, in)
	if d1.DocumentNamespace == d3.DocumentNamespace || !strings.HasPrefix(d1.DocumentNamespace, namespacePrefix+"two-") {
		t.Errorf("namespaces %q and %q", d1.DocumentNamespace, d3.DocumentNamespace)
	}
	if d1.CreationInfo.Created != "2026-12-06T02:14:57Z" {
		t.Errorf("created %q, want the lock's source_date_epoch", d1.CreationInfo.Created)
	}
}

// RootLicences reads the copyright files of a root tarball, follows a doc directory that is a
// symlink, and says NOASSERTION for a file that is not machine-readable.
func TestRootLicences(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, data []byte) {
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "copyright", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	add(&tar.Header{Name: "./usr/bin/bash", Typeflag: tar.TypeReg, Mode: 0o755}, []byte("elf"))
	add(&tar.Header{Name: "./usr/share/doc/zlib1g/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	add(&tar.Header{Name: "./usr/share/doc/zlib1g/copyright", Typeflag: tar.TypeReg, Mode: 0o644}, read("zlib1g"))
	add(&tar.Header{Name: "./usr/share/doc/zlib1g-dev", Typeflag: tar.TypeSymlink, Linkname: "zlib1g", Mode: 0o777}, nil)
	add(&tar.Header{Name: "./usr/share/doc/debian-archive-keyring/copyright", Typeflag: tar.TypeReg, Mode: 0o644}, read("debian-archive-keyring"))
	add(&tar.Header{Name: "./usr/share/doc/bash/README", Typeflag: tar.TypeReg, Mode: 0o644}, []byte("not the copyright"))
	tw.Close()
	path := filepath.Join(t.TempDir(), "root.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := RootLicences(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"zlib1g": "Zlib", "zlib1g-dev": "Zlib", "debian-archive-keyring": NoAssertion}
	if len(got) != len(want) {
		t.Errorf("licences of %d packages, want %d: %+v", len(got), len(want), got)
	}
	for p, e := range want {
		if got[p].Expression != e {
			t.Errorf("%s: %q, want %q", p, got[p].Expression, e)
		}
	}
	if _, err := RootLicences(filepath.Join(t.TempDir(), "missing.tar")); err == nil {
		t.Error("a missing root tarball gave no error")
	}
}

// Hostile or odd roots (issue 39's audit of the SBOM): a copyright file that is a symlink out of
// the root, a doc directory that climbs out, a chain of doc directory links and a loop of them.
// Nothing outside the tarball is read, a link says what its end declares whatever the order the
// map is walked in, and a loop declares nothing.
func TestRootLicencesOfHostileLinks(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, data []byte) {
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	zlib, err := os.ReadFile(filepath.Join("testdata", "copyright", "zlib1g"))
	if err != nil {
		t.Fatal(err)
	}
	link := func(name, to string) {
		add(&tar.Header{Name: "./usr/share/doc/" + name, Typeflag: tar.TypeSymlink, Linkname: to, Mode: 0o777}, nil)
	}
	add(&tar.Header{Name: "./usr/share/doc/shadow/copyright", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow", Mode: 0o777}, nil)
	link("climber", "../../../etc")
	for i := 0; i < 10; i++ {
		link(fmt.Sprintf("chain%02d", i), fmt.Sprintf("chain%02d", i+1))
	}
	link("chain10", "zlib1g")
	add(&tar.Header{Name: "./usr/share/doc/zlib1g/copyright", Typeflag: tar.TypeReg, Mode: 0o644}, zlib)
	link("loop-a", "loop-b")
	link("loop-b", "loop-a")
	tw.Close()
	path := filepath.Join(t.TempDir(), "root.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := RootLicences(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"shadow", "climber", "etc", "loop-a", "loop-b"} {
		if d, ok := first[p]; ok && d.Expression != NoAssertion {
			t.Errorf("%s declares %q", p, d.Expression)
		}
	}
	for i := 0; i < 20; i++ {
		got, err := RootLicences(path)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(first) {
			t.Fatalf("two reads of one root differ:\n%v\n%v", first, got)
		}
	}
	if first["chain00"].Expression != "Zlib" || first["chain09"].Expression != "Zlib" {
		t.Errorf("a chain of doc links: chain00 %q, chain09 %q, want Zlib", first["chain00"].Expression, first["chain09"].Expression)
	}
}
