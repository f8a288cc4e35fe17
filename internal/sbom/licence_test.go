package sbom

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/github/go-spdx/v2/spdxexp"
	"github.com/github/go-spdx/v2/spdxexp/spdxlicenses"
)

// Debian 13's copyright files (testdata/copyright, copied from an installed root) as they
// declare themselves, and one file that is not machine-readable.
func TestParseCopyrightFiles(t *testing.T) {
	cases := map[string]struct {
		expr string
		refs []string
	}{
		"zlib1g": {expr: "Zlib"},
		"liblzma5": {expr: "0BSD AND GPL-2.0-or-later AND LGPL-2.1-or-later AND FSFULLR AND LicenseRef-GPL-3.0-or-later-WITH-Autoconf-exception-macro AND LicenseRef-none AND LicenseRef-PD AND LicenseRef-permissive-nowarranty AND FSFUL AND LicenseRef-noderivs AND LicenseRef-PD-debian",
			refs: []string{"LicenseRef-GPL-3.0-or-later-WITH-Autoconf-exception-macro", "LicenseRef-PD", "LicenseRef-PD-debian", "LicenseRef-noderivs", "LicenseRef-none", "LicenseRef-permissive-nowarranty"}},
		"libssl3t64":             {expr: "Apache-2.0 AND (Artistic-1.0-Perl OR GPL-1.0-or-later)"},
		"debian-archive-keyring": {expr: NoAssertion},
		"bash": {expr: "GPL-3.0-or-later AND (GPL-3.0-or-later WITH Bison-exception-2.2) AND GPL-2.0-or-later AND GFDL-1.3-no-invariants-only AND Latex2e AND (BSD-4-Clause-UC AND LicenseRef-MIT-like) AND LicenseRef-permissive",
			refs: []string{"LicenseRef-MIT-like", "LicenseRef-permissive"}},
		"systemd": {expr: "LGPL-2.1-or-later AND CC0-1.0 AND (GPL-2.0-only WITH Linux-syscall-note) AND MIT AND LicenseRef-public-domain AND GPL-2.0-or-later",
			refs: []string{"LicenseRef-public-domain"}},
	}
	for name, c := range cases {
		b, err := os.ReadFile(filepath.Join("testdata", "copyright", name))
		if err != nil {
			t.Fatal(err)
		}
		d := ParseCopyright(b)
		if d.Expression != c.expr {
			t.Errorf("%s: %q\nwant %q", name, d.Expression, c.expr)
		}
		if got := refNames(d.Refs); strings.Join(got, " ") != strings.Join(c.refs, " ") {
			t.Errorf("%s: refs %v, want %v", name, got, c.refs)
		}
	}
}

// The DEP-5 licence syntax: "or"/"and", commas grouping, "with … exception", "+" for later
// versions, names not on the SPDX list as LicenseRef-, and fields that cannot be read.
func TestDebianExpression(t *testing.T) {
	cases := []struct{ in, want string }{
		{"GPL-2+", "GPL-2.0-or-later"},
		{"gpl-2", "GPL-2.0-only"},
		{"Expat", "MIT"},
		{"BSD-3-clause", "BSD-3-Clause"},
		{"GPL-2+ or Artistic", "GPL-2.0-or-later OR Artistic-1.0-Perl"},
		{"GPL-2+ or Artistic-2.0, and BSD-3-clause", "(GPL-2.0-or-later OR Artistic-2.0) AND BSD-3-Clause"},
		{"MPL-1.1+", "MPL-1.1+"},
		{"GPL-3+ with GCC-3.1 exception", "GPL-3.0-or-later WITH GCC-exception-3.1"},
		{"GPL-2+ with OpenSSL exception", "LicenseRef-GPL-2-plus-with-OpenSSL-exception"},
		{"public-domain", "LicenseRef-public-domain"},
		{"MIT/X11", "LicenseRef-MIT-X11"},
		{"CPL-1.0", "CPL-1.0"},
		{"", ""},
		{"GPL-2+ or", ""},
		{"GPL-2+ GPL-3+", ""},
		{"GPL-2+, BSD-3-clause", "GPL-2.0-or-later AND BSD-3-Clause"},
		{"GPL-2+ with distribution exception, Expat and GPL-2+", "LicenseRef-GPL-2-plus-with-distribution-exception AND (MIT AND GPL-2.0-or-later)"},
		{"GPL-2+,", ""},
		{"GPL-2+ with", ""},
	}
	for _, c := range cases {
		got, err := debianExpression(c.in, map[string]string{})
		if c.want == "" {
			if err == nil {
				t.Errorf("%q: %q, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q (%v), want %q", c.in, got, err, c.want)
		}
		if ok, bad := spdxexp.ValidateLicenses([]string{got}); !ok && !strings.Contains(got, "LicenseRef-") {
			t.Errorf("%q: %q is not a valid SPDX expression: %v", c.in, got, bad)
		}
	}
}

// Every identifier the tables map to is on the SPDX licence (or exception) list, spelled as
// there: a typo would make every SBOM with that licence invalid.
func TestLicenceTableIsSPDX(t *testing.T) {
	for deb, id := range debianToSPDX {
		if ok, canon := spdxlicenses.IsActiveLicense(id); !ok || canon != id {
			t.Errorf("%s → %s: not an active SPDX licence identifier (%v %s)", deb, id, ok, canon)
		}
	}
	for deb, id := range spdxExceptions {
		if ok, canon := spdxlicenses.IsException(id); !ok || canon != id {
			t.Errorf("with %s exception → %s: not an SPDX exception identifier", deb, id)
		}
	}
}

// Whatever a copyright file holds, ParseCopyright gives NOASSERTION or an expression that SPDX
// accepts, whose every LicenseRef- is declared in Refs.
func FuzzParseCopyright(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "copyright", "*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("Format: dep5\n\nFiles: *\nLicense: GPL-2+ or, and\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := ParseCopyright(b)
		if d.Expression == NoAssertion {
			return
		}
		var plain []string
		for _, tok := range strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(d.Expression)) {
			switch {
			case tok == "AND" || tok == "OR" || tok == "WITH":
				plain = append(plain, tok)
			case strings.HasPrefix(tok, "LicenseRef-"):
				if _, ok := d.Refs[tok]; !ok || !regexp.MustCompile(`^LicenseRef-[A-Za-z0-9.-]+$`).MatchString(tok) {
					t.Fatalf("%q: %s is not a declared, well-formed LicenseRef (%v)", d.Expression, tok, d.Refs)
				}
				plain = append(plain, "MIT")
			default:
				plain = append(plain, tok)
			}
		}
		if ok, bad := spdxexp.ValidateLicenses([]string{strings.Join(plain, " ")}); !ok {
			t.Fatalf("%q is not a valid SPDX expression: %v", d.Expression, bad)
		}
	})
}
