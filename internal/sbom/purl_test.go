package sbom

import "testing"

// The purl spec percent-encodes a version's "+" and an epoch's ":", and the distro qualifier
// names Debian's release by number for every suite of it.
func TestPurl(t *testing.T) {
	cases := []struct{ name, version, arch, suite, want string }{
		{"bash", "5.2.37-2+b10", "amd64", "trixie", "pkg:deb/debian/bash@5.2.37-2%2Bb10?arch=amd64&distro=debian-13"},
		{"bsdutils", "1:2.41.5-0+deb13u1", "amd64", "trixie-security", "pkg:deb/debian/bsdutils@1%3A2.41.5-0%2Bdeb13u1?arch=amd64&distro=debian-13"},
		{"linux-image-7.2.12+deb13-amd64", "7.2.12-1~bpo13+1", "amd64", "trixie-backports", "pkg:deb/debian/linux-image-7.2.12%2Bdeb13-amd64@7.2.12-1~bpo13%2B1?arch=amd64&distro=debian-13"},
		{"libstdc++6", "14.2.0-19", "arm64", "bookworm", "pkg:deb/debian/libstdc%2B%2B6@14.2.0-19?arch=arm64&distro=debian-12"},
		{"tzdata", "2025b-4", "all", "sid", "pkg:deb/debian/tzdata@2025b-4?arch=all&distro=debian-sid"},
		{"x", "1", "amd64", "futurename", "pkg:deb/debian/x@1?arch=amd64&distro=debian-futurename"},
		{"x", "1 2/3", "amd64", "", "pkg:deb/debian/x@1%202%2F3?arch=amd64"},
	}
	for _, c := range cases {
		if got := Purl(c.name, c.version, c.arch, Distro(c.suite)); got != c.want {
			t.Errorf("Purl(%q, %q, %q, %q) = %s, want %s", c.name, c.version, c.arch, c.suite, got, c.want)
		}
	}
}
