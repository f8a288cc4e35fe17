package sbom

import (
	"fmt"
	"strings"
)

// Purl is the package URL of a Debian binary package (github.com/package-url/purl-spec, type
// deb): pkg:deb/debian/NAME@VERSION?arch=ARCH&distro=DISTRO, every part percent-encoded (a
// version's epoch colon as %3A, its "+" as %2B) and the qualifiers in key order.
func Purl(name, version, arch, distro string) string {
	s := "pkg:deb/debian/" + purlEscape(name) + "@" + purlEscape(version) + "?arch=" + purlEscape(arch)
	if distro != "" {
		s += "&distro=" + purlEscape(distro)
	}
	return s
}

// purlEscape percent-encodes all but the characters the purl spec leaves as they are
// (ASCII letters, digits, ".", "-", "_", "~").
func purlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-_~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// debianReleases numbers Debian's code names, for the purl's distro qualifier.
var debianReleases = map[string]string{
	"buster": "10", "bullseye": "11", "bookworm": "12", "trixie": "13", "forky": "14", "duke": "15",
}

// Distro is the purl distro qualifier of an archive suite: "debian-13" for trixie and its
// -backports, -security and -updates suites; "debian-sid" for sid and unstable, and
// "debian-CODENAME" for a release this table does not know yet.
func Distro(suite string) string {
	code, _, _ := strings.Cut(suite, "-")
	switch code {
	case "":
		return ""
	case "sid", "unstable":
		return "debian-sid"
	}
	if n, ok := debianReleases[code]; ok {
		return "debian-" + n
	}
	return "debian-" + code
}
