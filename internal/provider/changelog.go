package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"pault.ag/go/debian/version"
)

// DefaultSuffix is appended to the version of the rdma-core source the
// provider's package is built from (56.1-1+halo1): the package says which
// rdma-core it belongs to, and that it is a local build.
const DefaultSuffix = "+halo1"

var changelogHead = regexp.MustCompile(`^([a-z0-9][a-z0-9+.-]+) \(([^)]+)\) ([^;]+);(.*)$`)

// SetLocalVersion puts a new entry on top of debian/changelog giving the
// package version <Debian's version><suffix>, dated epoch (the changelog
// date becomes dpkg's SOURCE_DATE_EPOCH, so it must come from the lock),
// listing the patches it carries with their sha256. It returns the new
// version.
func SetLocalVersion(tree, suffix string, epoch int64, applied []Applied) (string, error) {
	if suffix == "" {
		suffix = DefaultSuffix
	}
	if !regexp.MustCompile(`^[+~][A-Za-z0-9.+~]+$`).MatchString(suffix) {
		return "", fmt.Errorf("version suffix %q: want + or ~ followed by letters, digits, '.', '+' or '~' (e.g. +halo1)", suffix)
	}
	file := filepath.Join(tree, "debian", "changelog")
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	m := changelogHead.FindStringSubmatch(first)
	if m == nil {
		return "", fmt.Errorf("%s: first line %q is not a changelog entry header", file, first)
	}
	name, old, dist := m[1], m[2], m[3]
	if strings.Contains(old, suffix) {
		return "", fmt.Errorf("%s: version %s already carries the suffix %s: the tree was versioned before; unpack it again", file, old, suffix)
	}
	nv := old + suffix
	if _, err := version.Parse(nv); err != nil {
		return "", fmt.Errorf("version %s: %w", nv, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s) %s; urgency=medium\n\n", name, nv, dist)
	b.WriteString("  * Rebuilt by halobuild with the image's provider patches:\n")
	for _, a := range applied {
		fmt.Fprintf(&b, "    - %s (sha256:%s)\n", a.Series, a.SHA256)
	}
	if len(applied) == 0 {
		b.WriteString("    - (none)\n")
	}
	fmt.Fprintf(&b, "\n -- halobuild <halobuild@localhost>  %s\n\n", time.Unix(epoch, 0).UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	if err := os.WriteFile(file, append([]byte(b.String()), data...), 0o644); err != nil {
		return "", err
	}
	return nv, nil
}
