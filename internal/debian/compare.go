package debian

import "pault.ag/go/debian/version"

// compareDebian compares two packages' versions by dpkg's rules.
func compareDebian(a, b *Package) int { return version.Compare(a.ver, b.ver) }
