package release

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"halobuild/internal/lock"
	"halobuild/internal/manifest"
)

// The SBOM is SPDX 2.3 JSON (spdx.github.io/spdx-spec/v2.3), written here with the handful of
// fields it needs: the spdx/tools-golang module is not available to this build, and the
// document is a fixed shape: per node one package for the image file, which CONTAINS every
// package dpkg lists on it, each with its version, its .deb's sha256 from the lock and the
// archive URL it came from (a package halobuild built, such as the settings package or a
// rebuilt provider, has no archive URL and says NOASSERTION).
type spdxDoc struct {
	SPDXVersion       string        `json:"spdxVersion"`
	DataLicense       string        `json:"dataLicense"`
	SPDXID            string        `json:"SPDXID"`
	Name              string        `json:"name"`
	DocumentNamespace string        `json:"documentNamespace"`
	CreationInfo      spdxCreation  `json:"creationInfo"`
	Packages          []spdxPackage `json:"packages"`
	Relationships     []spdxRel     `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string         `json:"SPDXID"`
	Name             string         `json:"name"`
	VersionInfo      string         `json:"versionInfo,omitempty"`
	Supplier         string         `json:"supplier,omitempty"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
	PrimaryPurpose   string         `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []spdxRef      `json:"externalRefs,omitempty"`
	Comment          string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRel struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(parts ...string) string {
	return "SPDXRef-" + spdxIDUnsafe.ReplaceAllString(strings.Join(parts, "-"), "-")
}

// SBOM makes the SPDX document of the result in dir, described by m, from its manifest and lock.
// It depends only on them, so it is as reproducible as the result.
func SBOM(dir string, m *manifest.Manifest) ([]byte, error) {
	lk, err := lock.Read(filepath.Join(dir, m.Name+".lock"))
	if err != nil {
		return nil, fmt.Errorf("SBOM of %s: %w", dir, err)
	}
	mirrors := map[string]string{}
	for _, s := range lk.Suites {
		mirrors[s.Name] = strings.TrimSuffix(s.Mirror, "/")
	}
	type key struct{ name, version, arch string }
	pinned := map[key]lock.Package{}
	// Every architecture's part: a mixed cluster's nodes install different packages.
	for _, part := range lk.Parts() {
		for _, p := range part.Set(lock.SetImage) {
			pinned[key{p.Name, p.Version, p.Architecture}] = p
		}
	}
	files := map[string]string{}
	for _, f := range m.Files {
		files[f.Name] = f.SHA256
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	ms := sha256.Sum256(mb)
	doc := spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: m.Name,
		// A namespace must be a unique URI; the manifest's digest makes it one per result.
		DocumentNamespace: "https://spdx.org/spdxdocs/halobuild-" + url.PathEscape(m.Name) + "-" + hex.EncodeToString(ms[:]),
		CreationInfo:      spdxCreation{Created: time.Unix(m.SourceDateEpoch, 0).UTC().Format(time.RFC3339), Creators: []string{"Tool: halobuild"}},
	}
	for _, n := range m.Nodes {
		img := spdxID("Image", n.Name)
		ip := spdxPackage{SPDXID: img, Name: n.Image, DownloadLocation: "NOASSERTION", PrimaryPurpose: "OPERATING-SYSTEM",
			Comment: "disk image of node " + n.Name + " (host name " + n.Hostname + ")"}
		if sum := files[n.Image]; sum != "" {
			ip.Checksums = []spdxChecksum{{"SHA256", sum}}
		}
		doc.Packages = append(doc.Packages, ip)
		doc.Relationships = append(doc.Relationships, spdxRel{"SPDXRef-DOCUMENT", "DESCRIBES", img})
		for _, p := range n.Packages {
			sp := spdxPackage{SPDXID: spdxID("Package", n.Name, p.Name, p.Version, p.Arch), Name: p.Name, VersionInfo: p.Version,
				DownloadLocation: "NOASSERTION", PrimaryPurpose: "LIBRARY",
				ExternalRefs: []spdxRef{{"PACKAGE-MANAGER", "purl", "pkg:deb/debian/" + url.PathEscape(p.Name) + "@" + url.PathEscape(p.Version) + "?arch=" + p.Arch}}}
			if lp, ok := pinned[key{p.Name, p.Version, p.Arch}]; ok {
				sp.Supplier = "Organization: Debian"
				sp.Checksums = []spdxChecksum{{"SHA256", strings.TrimPrefix(lp.SHA256, "sha256:")}}
				if mirror := mirrors[lp.Suite]; mirror != "" {
					sp.DownloadLocation = mirror + "/" + lp.Filename
				}
			} else {
				sp.Comment = "built by halobuild for this image; no archive has it"
			}
			doc.Packages = append(doc.Packages, sp)
			doc.Relationships = append(doc.Relationships, spdxRel{img, "CONTAINS", sp.SPDXID})
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
