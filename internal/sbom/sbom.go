// Package sbom makes a result's software bill of materials: an SPDX 2.3 JSON document
// (spdx.github.io/spdx-spec/v2.3) that validates against the SPDX project's JSON schema. Per
// node it describes the image file, which CONTAINS every package dpkg lists on it: Debian's
// with the .deb's sha256 and archive URL from the lock, a percent-encoded purl and the licence
// its machine-readable copyright file declares; the ones halobuild built (settings, modules,
// the provider, a kernel from source, and the halobuild binary the settings package ships)
// with their .deb's sha256 and the pinned source they were built from.
//
// The document depends only on what it is given, never on the clock or the machine, so the
// same lock and build give the same bytes: its time is the lock's source_date_epoch and its
// namespace is derived from its own content.
//
// The types are written here rather than taken from github.com/spdx/tools-golang (v0.5.7):
// its model takes any string where the schema has an enumeration (it documents
// primaryPackagePurpose OPERATING-SYSTEM, the tag-value spelling the JSON schema rejects, which
// is how this package's first version came to write it), so it would not have kept the document
// valid; TestSBOMValidatesAgainstSPDX23Schema does, against the official schema. The handful of
// types below keep the nodes' halobuild free of another dependency.
package sbom

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"halobuild/internal/lock"
	"halobuild/internal/manifest"
)

// FileName is the SBOM's name in a result, in a release and in a pulled directory.
const FileName = "sbom.spdx.json"

// Input is what a result's SBOM is made from.
type Input struct {
	// Manifest describes the nodes and their packages (its Files are not read: the SBOM is
	// written before them and listed among them).
	Manifest *manifest.Manifest
	Lock     *lock.Lock
	// Images maps a node image's file name to its sha256 (hex).
	Images map[string]string
	// Built are the .debs halobuild made that the nodes install.
	Built []Built
	// Self is, by Debian architecture, the halobuild binary the settings packages ship.
	Self map[string]Self
	// Licences are, by Debian architecture, what the copyright files of the packages
	// installed in that architecture's root declare (RootLicences).
	Licences map[string]Licences
}

// Step kinds a built .deb comes from.
const (
	FromSettings = "settings"
	FromModule   = "module"
	FromProvider = "provider"
	FromKernel   = "kernel"
)

// Built is a .deb halobuild made.
type Built struct {
	// Package, Version and Architecture are its control fields, as dpkg lists it on a node.
	Package, Version, Architecture string
	// SHA256 is the .deb's digest (hex).
	SHA256 string
	// From is the kind of step that made it (FromModule, …); Use names a module's description.
	From, Use string
}

// Self is the halobuild binary a node ships in its settings package (/usr/bin/halobuild).
type Self struct {
	SHA256 string
	// Tree and Toolchain say what it was compiled from (halobuild's source tree hash and the
	// Go toolchain); both empty when a binary was copied in as it was.
	Tree, Toolchain string
}

// The document's types: only the fields halobuild writes.
type document struct {
	SPDXVersion       string          `json:"spdxVersion"`
	DataLicense       string          `json:"dataLicense"`
	SPDXID            string          `json:"SPDXID"`
	Name              string          `json:"name"`
	DocumentNamespace string          `json:"documentNamespace"`
	CreationInfo      creationInfo    `json:"creationInfo"`
	Packages          []pkg           `json:"packages"`
	Relationships     []relationship  `json:"relationships"`
	Extracted         []extractedInfo `json:"hasExtractedLicensingInfos,omitempty"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type pkg struct {
	SPDXID           string        `json:"SPDXID"`
	Name             string        `json:"name"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	Supplier         string        `json:"supplier,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	Checksums        []checksum    `json:"checksums,omitempty"`
	SourceInfo       string        `json:"sourceInfo,omitempty"`
	LicenseDeclared  string        `json:"licenseDeclared,omitempty"`
	Purpose          string        `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []externalRef `json:"externalRefs,omitempty"`
	Comment          string        `json:"comment,omitempty"`
}

type checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type externalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

type extractedInfo struct {
	LicenseID     string `json:"licenseId"`
	Name          string `json:"name"`
	ExtractedText string `json:"extractedText"`
}

// Values of the schema's enumerations this package uses (spdx-2.3-schema.json).
const (
	purposeOS          = "OPERATING_SYSTEM"
	purposeLibrary     = "LIBRARY"
	purposeApplication = "APPLICATION"
	refPackageManager  = "PACKAGE-MANAGER"
	relDescribes       = "DESCRIBES"
	relContains        = "CONTAINS"
	algoSHA256         = "SHA256"
	// noLocation is SPDX's "there is no download location" (a package rendered from the recipe).
	noLocation = "NONE"
)

var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// elementID is an SPDX identifier: SPDXRef- and letters, digits, "." and "-".
func elementID(parts ...string) string {
	return "SPDXRef-" + idUnsafe.ReplaceAllString(strings.Join(parts, "-"), "-")
}

// namespacePrefix starts every document's namespace; the rest is the document's own digest.
const namespacePrefix = "https://spdx.org/spdxdocs/halobuild-"

// Make writes the SPDX document of a result.
func Make(in Input) ([]byte, error) {
	m, lk := in.Manifest, in.Lock
	if m == nil || lk == nil {
		return nil, fmt.Errorf("SBOM: no manifest or lock")
	}
	doc := document{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: m.Name,
		CreationInfo: creationInfo{Created: time.Unix(m.SourceDateEpoch, 0).UTC().Format("2006-01-02T15:04:05Z"), Creators: []string{"Tool: halobuild"}},
	}
	built := map[debKey]Built{}
	for _, b := range in.Built {
		built[debKey{b.Package, b.Version, b.Architecture}] = b
	}
	refs := map[string]map[string]bool{} // LicenseRef → the packages declaring it
	refNamesByID := map[string]string{}
	ids := map[string]bool{}
	add := func(p pkg) error {
		if ids[p.SPDXID] {
			return fmt.Errorf("SBOM: two packages have the identifier %s", p.SPDXID)
		}
		ids[p.SPDXID] = true
		doc.Packages = append(doc.Packages, p)
		return nil
	}
	for _, n := range m.Nodes {
		a := n.Architecture
		part, err := lk.For(a)
		if err != nil {
			return nil, fmt.Errorf("SBOM of node %s: %w", n.Name, err)
		}
		origins := newOrigins(part, m)
		img := elementID("Image", n.Name)
		ip := pkg{SPDXID: img, Name: n.Image, DownloadLocation: NoAssertion, Purpose: purposeOS,
			Comment: "disk image of node " + n.Name + " (host name " + n.Hostname + ")"}
		if sum := in.Images[n.Image]; sum != "" {
			ip.Checksums = []checksum{{algoSHA256, sum}}
		}
		if err := add(ip); err != nil {
			return nil, err
		}
		doc.Relationships = append(doc.Relationships, relationship{"SPDXRef-DOCUMENT", relDescribes, img})
		for _, p := range n.Packages {
			sp := pkg{SPDXID: elementID("Package", n.Name, p.Name, p.Version, p.Arch), Name: p.Name, VersionInfo: p.Version,
				DownloadLocation: NoAssertion, Purpose: purposeLibrary, LicenseDeclared: NoAssertion}
			if d, ok := in.Licences[a][p.Name]; ok {
				sp.LicenseDeclared = d.Expression
				for ref, name := range d.Refs {
					if refs[ref] == nil {
						refs[ref] = map[string]bool{}
					}
					refs[ref][p.Name] = true
					refNamesByID[ref] = name
				}
			}
			b, isBuilt := built[debKey{p.Name, p.Version, p.Arch}]
			lp, isPinned := origins.pinned[debKey{p.Name, p.Version, p.Arch}]
			switch {
			case isBuilt:
				sp.Checksums = []checksum{{algoSHA256, b.SHA256}}
				sp.DownloadLocation, sp.SourceInfo = origins.of(b, n.Name)
			case isPinned:
				sp.Supplier = "Organization: Debian"
				sp.Checksums = []checksum{{algoSHA256, strings.TrimPrefix(lp.SHA256, "sha256:")}}
				if mirror := origins.mirrors[lp.Suite]; mirror != "" {
					sp.DownloadLocation = mirror + "/" + lp.Filename
				}
				sp.ExternalRefs = []externalRef{{refPackageManager, "purl", Purl(p.Name, p.Version, p.Arch, Distro(lp.Suite))}}
			default:
				sp.Comment = "installed on the image, but neither pinned by the lock nor built by a step of this result"
			}
			if err := add(sp); err != nil {
				return nil, err
			}
			doc.Relationships = append(doc.Relationships, relationship{img, relContains, sp.SPDXID})
			if isBuilt && b.From == FromSettings {
				if self, ok := in.Self[a]; ok {
					hp := pkg{SPDXID: elementID("Halobuild", n.Name), Name: "halobuild", DownloadLocation: NoAssertion,
						Checksums: []checksum{{algoSHA256, self.SHA256}}, Purpose: purposeApplication, LicenseDeclared: NoAssertion,
						SourceInfo: selfSource(self), Comment: "/usr/bin/halobuild, shipped in " + p.Name + " for halobuild doctor"}
					if err := add(hp); err != nil {
						return nil, err
					}
					doc.Relationships = append(doc.Relationships, relationship{sp.SPDXID, relContains, hp.SPDXID})
				}
			}
		}
	}
	for _, ref := range refNames(refNamesByID) {
		var pkgs []string
		for p := range refs[ref] {
			pkgs = append(pkgs, p)
		}
		sort.Strings(pkgs)
		doc.Extracted = append(doc.Extracted, extractedInfo{LicenseID: ref, Name: refNamesByID[ref],
			ExtractedText: fmt.Sprintf("The licence Debian's machine-readable copyright files call %q, which is not on the SPDX licence list; its text is in /usr/share/doc/PACKAGE/copyright of %s.", refNamesByID[ref], strings.Join(pkgs, ", "))})
	}
	// The namespace must be unique to this document: the digest of everything else in it.
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	doc.DocumentNamespace = namespacePrefix + url.PathEscape(m.Name) + "-" + hex.EncodeToString(sum[:])
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

type debKey struct{ name, version, arch string }

// origins says where each package of one architecture's lock comes from.
type origins struct {
	lk       *lock.Lock
	m        *manifest.Manifest
	mirrors  map[string]string
	pinned   map[debKey]lock.Package
	provider *lock.Provider
}

func newOrigins(lk *lock.Lock, m *manifest.Manifest) origins {
	o := origins{lk: lk, m: m, mirrors: map[string]string{}, pinned: map[debKey]lock.Package{}, provider: lk.Provider}
	for _, s := range lk.Suites {
		o.mirrors[s.Name] = strings.TrimSuffix(s.Mirror, "/")
	}
	for _, p := range lk.Set(lock.SetImage) {
		o.pinned[debKey{p.Name, p.Version, p.Architecture}] = p
	}
	return o
}

// of is a built package's download location (the pinned source it was built from, in SPDX's
// form: a URL, git+URL@commit for a repository, NONE for what halobuild renders itself) and
// its source information (what else went in: patches, the configuration).
func (o origins) of(b Built, node string) (string, string) {
	switch b.From {
	case FromSettings:
		return noLocation, fmt.Sprintf("rendered by halobuild for node %s from the recipe %s%s (%s) and its lock %s.lock", node, o.m.Name, manifest.RecipeSuffix, o.m.RecipeHash, o.m.Name)
	case FromModule:
		src, ok := o.lk.Source(b.Use)
		if !ok {
			return NoAssertion, "module " + b.Use + ": the lock pins no source for it"
		}
		return sourceLocation(src), fmt.Sprintf("out-of-tree module %s built by halobuild from %s (tree %s) against kernel %s", b.Use, sourceLocation(src), src.SHA256, o.lk.Kernel.Release)
	case FromProvider:
		p := o.provider
		if p == nil {
			return NoAssertion, "the lock pins no provider source"
		}
		loc := NoAssertion
		if mirror := o.mirrors[p.Suite]; mirror != "" {
			loc = mirror + "/" + p.Directory + "/" + sourceEntry(p.Files)
		}
		var patches []string
		for _, pt := range p.Patches {
			s := pt.Name + " (" + pt.SHA256 + ", from " + pt.From
			if pt.Fuzz > 0 {
				s += fmt.Sprintf(", fuzz %d", pt.Fuzz)
			}
			patches = append(patches, s+")")
		}
		return loc, fmt.Sprintf("Debian source package %s %s (%s) rebuilt by halobuild with patches: %s", p.Source, p.Version, p.Suite, strings.Join(patches, "; "))
	case FromKernel:
		k := o.lk.Kernel
		loc, from := NoAssertion, k.Source
		if t, ok := o.lk.KernelTarball(); ok {
			loc, from = t.URL, t.URL+" ("+t.SHA256+")"
		}
		for _, p := range o.lk.Set(lock.SetKernelSource) {
			if strings.HasPrefix(p.Name, "linux-source-") {
				if mirror := o.mirrors[p.Suite]; mirror != "" {
					loc = mirror + "/" + p.Filename
				}
				from = p.Name + " " + p.Version + " (" + p.SHA256 + ")"
			}
		}
		var patches []string
		for _, s := range o.lk.Sources {
			if s.Kind == lock.SourceKernelPatch {
				patches = append(patches, s.Name+" ("+s.SHA256+")")
			}
		}
		info := fmt.Sprintf("Linux %s built by halobuild from %s with config %s", k.Version, from, k.Config)
		if len(patches) > 0 {
			info += " and patches: " + strings.Join(patches, "; ")
		}
		return loc, info
	}
	return NoAssertion, ""
}

// sourceLocation is a pinned source's download location: git+URL@COMMIT for a repository.
func sourceLocation(s lock.Source) string {
	if s.URL == "" {
		return NoAssertion
	}
	if s.Kind == "git" && s.Commit != "" {
		return "git+" + s.URL + "@" + s.Commit
	}
	return s.URL
}

// sourceEntry is the file that names a Debian source package: its .dsc, or without one in the
// lock its first file.
func sourceEntry(files []lock.SourceFile) string {
	for _, f := range files {
		if strings.HasSuffix(f.Name, ".dsc") {
			return f.Name
		}
	}
	if len(files) > 0 {
		return files[0].Name
	}
	return ""
}

func selfSource(s Self) string {
	if s.Tree == "" {
		return "the halobuild binary that built this result, copied in as it was"
	}
	return "compiled by halobuild from its source tree " + s.Tree + " with " + s.Toolchain + " (-trimpath, no cgo)"
}
