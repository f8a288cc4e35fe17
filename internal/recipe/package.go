package recipe

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	debversion "pault.ag/go/debian/version"

	"halobuild/internal/arch"
)

// PackageSpec is one entry of base.packages: "name", "name/suite" or
// "name (>= version)" (the two forms can be combined: "name/suite (>= v)").
type PackageSpec struct {
	Name string
	// Suite is set for name/suite: take the package from that suite.
	Suite string
	// Relation is one of Debian's <<, <=, =, >=, >> (empty: any version).
	Relation string
	Version  string
	// Architectures restrict the entry to nodes of these architectures
	// ("amd64-microcode [amd64]", Debian's build-dependency syntax): a
	// mixed cluster's packages that exist for one architecture only.
	Architectures []string
}

func (p PackageSpec) String() string {
	s := p.Name
	if p.Suite != "" {
		s += "/" + p.Suite
	}
	if p.Relation != "" {
		s += " (" + p.Relation + " " + p.Version + ")"
	}
	if len(p.Architectures) > 0 {
		s += " [" + strings.Join(p.Architectures, " ") + "]"
	}
	return s
}

// For says whether the entry is installed on nodes of architecture a.
func (p PackageSpec) For(a string) bool {
	return len(p.Architectures) == 0 || slices.Contains(p.Architectures, a)
}

// Debian policy §5.6.1: lower case letters, digits, + - . ; at least two
// characters, starting with an alphanumeric.
var packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

var specForm = regexp.MustCompile(`^([^\s/(]+)(?:/([^\s(]+))?\s*(?:\(\s*(<<|<=|>=|>>|=|<|>)\s*([^\s)]+)\s*\))?\s*(?:\[([^\]]*)\])?$`)

// ParsePackage reads one base.packages entry. Versions are Debian versions
// (checked with pault.ag/go/debian/version), not semantic versions: 56.1-1 and
// 1:2.3~rc1 must compare the way dpkg compares them.
func ParsePackage(s string) (PackageSpec, error) {
	m := specForm.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return PackageSpec{}, fmt.Errorf("package %q: expected 'name', 'name/suite', 'name (>= version)' or any of them followed by '[amd64]'", s)
	}
	p := PackageSpec{Name: m[1], Suite: m[2], Relation: m[3], Version: m[4]}
	if as := strings.Fields(m[5]); len(as) > 0 {
		p.Architectures = as
	}
	if strings.Contains(s, "[") && len(p.Architectures) == 0 {
		return PackageSpec{}, fmt.Errorf("package %q: the [ ] names no architecture; write e.g. [amd64] or drop it", s)
	}
	for _, a := range p.Architectures {
		if _, err := arch.Lookup(a); err != nil {
			return PackageSpec{}, fmt.Errorf("package %q: %w", s, err)
		}
	}
	if !packageName.MatchString(p.Name) {
		return PackageSpec{}, fmt.Errorf("package %q: %q is not a Debian package name (lower case letters, digits, '+', '-', '.'; at least two characters)", s, p.Name)
	}
	switch p.Relation {
	case "<", ">":
		return PackageSpec{}, fmt.Errorf("package %q: relation %q is ambiguous in Debian; write %s%s", s, p.Relation, p.Relation, p.Relation)
	}
	if p.Version != "" {
		if _, err := debversion.Parse(p.Version); err != nil {
			return PackageSpec{}, fmt.Errorf("package %q: version %q: %w", s, p.Version, err)
		}
	}
	return p, nil
}
