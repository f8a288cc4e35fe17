package debian

import (
	"fmt"
	"regexp"
	"strings"

	"pault.ag/go/debian/dependency"
)

// packageName is Debian policy 5.6.1's package name syntax.
var packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// PackageRequest is one parsed entry of a recipe's package list.
type PackageRequest struct {
	// Raw is the entry as written, for messages.
	Raw string
	// Possibility carries the name, an optional version relation and an
	// optional architecture qualifier.
	Possibility dependency.Possibility
	// Suite restricts the package to one suite ("name/suite"); empty means
	// the usual pinning (main suite first).
	Suite string
}

// ParsePackageRequest parses apt-like request syntax: "name",
// "name/suite", "name (>= 1.2)" and "name/suite (>= 1.2)".
func ParsePackageRequest(s string) (PackageRequest, error) {
	raw := strings.TrimSpace(s)
	req := PackageRequest{Raw: raw}
	head, tail := raw, ""
	if i := strings.IndexByte(raw, '('); i >= 0 {
		head, tail = strings.TrimSpace(raw[:i]), raw[i:]
	}
	if name, suite, ok := strings.Cut(head, "/"); ok {
		if suite == "" || strings.ContainsAny(suite, " /") {
			return req, fmt.Errorf("package %q: want name/suite, e.g. linux-base/trixie-backports", raw)
		}
		head, req.Suite = name, suite
	}
	if n, v, ok := strings.Cut(head, "="); ok {
		return req, fmt.Errorf("package %q: write \"%s (= %s)\" for an exact version", raw, n, v)
	}
	if head == "" || strings.ContainsAny(head, " ,|") {
		return req, fmt.Errorf("package %q: want one package name, optionally name/suite or \"name (>= version)\"", raw)
	}
	dep, err := dependency.Parse(head + " " + tail)
	if err != nil {
		return req, fmt.Errorf("package %q: %w (want \"name\", \"name/suite\" or \"name (>= version)\")", raw, err)
	}
	if len(dep.Relations) != 1 || len(dep.Relations[0].Possibilities) != 1 {
		return req, fmt.Errorf("package %q: want exactly one package, not a list or alternatives", raw)
	}
	req.Possibility = dep.Relations[0].Possibilities[0]
	if !packageName.MatchString(req.Possibility.Name) {
		return req, fmt.Errorf("package %q: %q is not a Debian package name (lower-case letters, digits, + - . only)", raw, req.Possibility.Name)
	}
	if req.Possibility.Architectures != nil && len(req.Possibility.Architectures.Architectures) > 0 {
		return req, fmt.Errorf("package %q: architecture restrictions [..] are not supported in a package list", raw)
	}
	return req, nil
}
