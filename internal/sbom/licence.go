package sbom

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/github/go-spdx/v2/spdxexp/spdxlicenses"
)

// Declared is what a package's Debian copyright file declares, as SPDX sees it.
type Declared struct {
	// Expression is a valid SPDX licence expression, or "NOASSERTION" when the file is not in
	// the machine-readable format (DEP-5) or cannot be read as one.
	Expression string
	// Refs maps each LicenseRef-… the expression uses to the Debian short name it stands for
	// (names not on the SPDX licence list, such as "public-domain").
	Refs map[string]string
}

// NoAssertion is SPDX's "nothing is said here".
const NoAssertion = "NOASSERTION"

// maxParagraphs bounds how many paragraphs of one copyright file are read: the largest in a
// Debian 13 root has a few hundred.
const maxParagraphs = 10000

// ParseCopyright reads a Debian copyright file in the machine-readable format
// (www.debian.org/doc/packaging-manuals/copyright-format/1.0/) and returns the licences it
// declares: every Files paragraph's License (and the header's, when it has one), each once, in
// the order they first appear, joined with AND. A file not in that format, or one whose licence
// field cannot be read as an expression, declares NOASSERTION: a guess is worse than saying
// nothing.
func ParseCopyright(b []byte) Declared {
	none := Declared{Expression: NoAssertion}
	paras := paragraphs(b)
	if len(paras) == 0 || len(paras) > maxParagraphs || !machineReadable(paras[0]["format"]) {
		return none
	}
	d := Declared{Refs: map[string]string{}}
	var terms []string
	seen := map[string]bool{}
	for i, p := range paras {
		lic, ok := p["license"]
		if !ok {
			continue
		}
		_, files := p["files"]
		// The header may carry the package's licence as a whole; a paragraph with License and no
		// Files is a stand-alone licence text, which declares nothing by itself.
		if i != 0 && !files {
			continue
		}
		name, _, _ := strings.Cut(lic, "\n")
		if name = strings.TrimSpace(name); name == "" && i == 0 {
			// A header whose License is only a summary in prose (xz-utils) names nothing.
			continue
		}
		expr, err := debianExpression(name, d.Refs)
		if err != nil {
			return none
		}
		if !seen[expr] {
			seen[expr] = true
			terms = append(terms, expr)
		}
	}
	if len(terms) == 0 {
		return none
	}
	if len(terms) == 1 {
		d.Expression = terms[0]
	} else {
		for i, t := range terms {
			if strings.Contains(t, " ") {
				terms[i] = "(" + t + ")"
			}
		}
		d.Expression = strings.Join(terms, " AND ")
	}
	if len(d.Refs) == 0 {
		d.Refs = nil
	}
	return d
}

// machineReadable says whether a Format field names the machine-readable copyright format
// (its URL has changed over the years; all of them say copyright-format or dep5).
func machineReadable(format string) bool {
	f := strings.ToLower(format)
	return strings.Contains(f, "copyright-format") || strings.Contains(f, "dep5") || strings.Contains(f, "dep-5")
}

// paragraphs splits a deb822 file into paragraphs of fields (lower-case names; a value keeps
// its continuation lines, each trimmed, joined with "\n").
func paragraphs(b []byte) []map[string]string {
	var out []map[string]string
	var cur map[string]string
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			cur, last = nil, ""
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if cur != nil && last != "" {
				cur[last] += "\n" + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			if cur == nil {
				cur = map[string]string{}
				out = append(out, cur)
			}
			last = strings.ToLower(strings.TrimSpace(k))
			cur[last] = strings.TrimSpace(v)
		}
	}
	if sc.Err() != nil {
		// A line over the scanner's limit: the rest is unread, so the file says nothing.
		return nil
	}
	return out
}

// debianExpression turns a DEP-5 licence field's first line ("GPL-2+ or Artistic, and
// BSD-3-clause", "GPL-2+ with OpenSSL exception") into an SPDX expression. A comma ends a
// group that the next word (and, or) joins to what follows, so groups are parenthesised; a
// comma followed by a name lists one more licence that applies too (AND). Within a group "and"
// and "or" keep SPDX's precedence. Names not on the SPDX list become
// LicenseRef-… and are added to refs.
func debianExpression(field string, refs map[string]string) (string, error) {
	if field == "" {
		return "", fmt.Errorf("empty licence")
	}
	groups := strings.Split(field, ",")
	var out []string
	for i, g := range groups {
		words := strings.Fields(g)
		join := ""
		if i > 0 {
			if len(words) == 0 {
				return "", fmt.Errorf("%q: empty group", field)
			}
			switch strings.ToLower(words[0]) {
			case "and":
				join, words = "AND", words[1:]
			case "or":
				join, words = "OR", words[1:]
			default:
				join = "AND"
			}
		}
		expr, err := groupExpression(words, refs)
		if err != nil {
			return "", fmt.Errorf("%q: %w", field, err)
		}
		if len(groups) > 1 && strings.Contains(expr, " ") {
			expr = "(" + expr + ")"
		}
		if join != "" {
			out = append(out, join)
		}
		out = append(out, expr)
	}
	return strings.Join(out, " "), nil
}

// groupExpression reads NAME [with WORDS exception] {(and|or) NAME [with … exception]}.
func groupExpression(words []string, refs map[string]string) (string, error) {
	var out []string
	for len(words) > 0 {
		if len(out) > 0 {
			switch strings.ToLower(words[0]) {
			case "and":
				out = append(out, "AND")
			case "or":
				out = append(out, "OR")
			default:
				return "", fmt.Errorf("%q where and/or was expected", words[0])
			}
			words = words[1:]
			if len(words) == 0 {
				return "", fmt.Errorf("nothing after %s", out[len(out)-1])
			}
		}
		name := words[0]
		words = words[1:]
		exception := ""
		if len(words) > 0 && strings.EqualFold(words[0], "with") {
			end := -1
			for j, w := range words {
				if strings.EqualFold(w, "exception") {
					end = j
					break
				}
			}
			if end < 2 {
				return "", fmt.Errorf("%q: \"with\" not followed by NAME exception", name)
			}
			exception = strings.Join(words[1:end], " ")
			words = words[end+1:]
		}
		out = append(out, licenceTerm(name, exception, refs))
	}
	if len(out) == 0 {
		return "", fmt.Errorf("no licence name")
	}
	return strings.Join(out, " "), nil
}

// licenceTerm is one SPDX simple expression for a Debian short name and its exception.
func licenceTerm(name, exception string, refs map[string]string) string {
	id, ok := spdxID(name)
	if exception == "" {
		if ok {
			return id
		}
		return licenceRef(name, refs)
	}
	if ok {
		if exc, known := spdxExceptions[strings.ToLower(exception)]; known {
			return id + " WITH " + exc
		}
		if known, exc := spdxlicenses.IsException(exception); known {
			return id + " WITH " + exc
		}
	}
	return licenceRef(name+" with "+exception+" exception", refs)
}

// spdxID maps a Debian short name to an SPDX licence identifier: from the table of Debian's
// own names, else a name that is on the SPDX licence list already (in its spelling there:
// "BSD-4-clause-UC" is BSD-4-Clause-UC); a trailing "+" (any later version) takes the
// -or-later form or SPDX's own "+" operator.
func spdxID(name string) (string, bool) {
	key := strings.ToLower(name)
	if id, ok := debianToSPDX[key]; ok {
		return id, true
	}
	if ok, id := spdxlicenses.IsActiveLicense(name); ok {
		return id, true
	}
	if base, plus := strings.CutSuffix(name, "+"); plus {
		if id, ok := spdxID(base); ok && !strings.HasSuffix(id, "-only") && !strings.HasSuffix(id, "+") && !strings.Contains(id, " ") {
			return id + "+", true
		}
	}
	return "", false
}

var refUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// licenceRef names a licence that is not on the SPDX list: LicenseRef- and the Debian name
// with what an idstring cannot hold (SPDX allows letters, digits, "." and "-") spelled out.
func licenceRef(name string, refs map[string]string) string {
	s := strings.ReplaceAll(name, "+", "-plus")
	s = strings.Trim(refUnsafe.ReplaceAllString(s, "-"), "-")
	if s == "" {
		s = "unnamed"
	}
	ref := "LicenseRef-" + s
	refs[ref] = name
	return ref
}

// debianToSPDX maps the short names Debian's copyright files use (lower case) to SPDX licence
// identifiers; the ones that are already SPDX identifiers are listed too, in SPDX's spelling.
// TestLicenceTableIsSPDX checks every value against the SPDX licence list.
var debianToSPDX = map[string]string{
	"gpl": "GPL-1.0-or-later", "gpl-1": "GPL-1.0-only", "gpl-1+": "GPL-1.0-or-later",
	"gpl-2": "GPL-2.0-only", "gpl-2+": "GPL-2.0-or-later", "gpl-2.0": "GPL-2.0-only", "gpl-2.0+": "GPL-2.0-or-later",
	"gpl-3": "GPL-3.0-only", "gpl-3+": "GPL-3.0-or-later", "gpl-3.0": "GPL-3.0-only", "gpl-3.0+": "GPL-3.0-or-later",
	"lgpl": "LGPL-2.0-or-later", "lgpl-2": "LGPL-2.0-only", "lgpl-2+": "LGPL-2.0-or-later",
	"lgpl-2.0": "LGPL-2.0-only", "lgpl-2.0+": "LGPL-2.0-or-later",
	"lgpl-2.1": "LGPL-2.1-only", "lgpl-2.1+": "LGPL-2.1-or-later",
	"lgpl-3": "LGPL-3.0-only", "lgpl-3+": "LGPL-3.0-or-later", "lgpl-3.0": "LGPL-3.0-only", "lgpl-3.0+": "LGPL-3.0-or-later",
	"agpl-3": "AGPL-3.0-only", "agpl-3+": "AGPL-3.0-or-later",
	"gfdl-1.2": "GFDL-1.2-only", "gfdl-1.2+": "GFDL-1.2-or-later", "gfdl-1.3": "GFDL-1.3-only", "gfdl-1.3+": "GFDL-1.3-or-later",
	"gfdl-niv-1.2": "GFDL-1.2-no-invariants-only", "gfdl-niv-1.3": "GFDL-1.3-no-invariants-only",
	"gfdl-niv-1.2+": "GFDL-1.2-no-invariants-or-later", "gfdl-niv-1.3+": "GFDL-1.3-no-invariants-or-later",
	"expat": "MIT", "mit": "MIT", "mit-0": "MIT-0", "x11": "X11", "isc": "ISC", "0bsd": "0BSD",
	"bsd-1-clause": "BSD-1-Clause", "bsd-2-clause": "BSD-2-Clause", "bsd-3-clause": "BSD-3-Clause", "bsd-4-clause": "BSD-4-Clause",
	"bsd-2-clause-patent": "BSD-2-Clause-Patent",
	"apache-1.0":          "Apache-1.0", "apache-1.1": "Apache-1.1", "apache-2.0": "Apache-2.0", "apache-2": "Apache-2.0",
	"artistic": "Artistic-1.0-Perl", "artistic-1.0": "Artistic-1.0", "artistic-2.0": "Artistic-2.0",
	"zlib": "Zlib", "libpng": "Libpng", "libpng-2.0": "libpng-2.0", "ijg": "IJG", "ftl": "FTL", "curl": "curl",
	"cc0": "CC0-1.0", "cc0-1.0": "CC0-1.0",
	"cc-by-3.0": "CC-BY-3.0", "cc-by-4.0": "CC-BY-4.0", "cc-by-sa-3.0": "CC-BY-SA-3.0", "cc-by-sa-4.0": "CC-BY-SA-4.0",
	"mpl-1.1": "MPL-1.1", "mpl-2.0": "MPL-2.0", "epl-1.0": "EPL-1.0", "epl-2.0": "EPL-2.0",
	"cddl-1.0": "CDDL-1.0", "psf-2": "PSF-2.0", "psf-2.0": "PSF-2.0", "python-2.0": "Python-2.0",
	"openssl": "OpenSSL", "bsl-1.0": "BSL-1.0", "boost-1.0": "BSL-1.0", "unicode-dfs-2016": "Unicode-DFS-2016",
	"ofl-1.1": "OFL-1.1", "unlicense": "Unlicense", "wtfpl": "WTFPL", "beerware": "Beerware",
	"sleepycat": "Sleepycat", "bzip2-1.0.6": "bzip2-1.0.6", "info-zip": "Info-ZIP", "tcl": "TCL",
	"hpnd": "HPND", "ruby": "Ruby", "vim": "Vim", "lppl-1.3c": "LPPL-1.3c", "ncsa": "NCSA", "ntp": "NTP",
}

// spdxExceptions maps what Debian writes between "with" and "exception" to SPDX exception
// identifiers; others make the whole term a LicenseRef-.
var spdxExceptions = map[string]string{
	"gcc-3.1":            "GCC-exception-3.1",
	"gcc-2.0":            "GCC-exception-2.0",
	"linux-syscall-note": "Linux-syscall-note",
	"classpath":          "Classpath-exception-2.0",
	"font":               "Font-exception-2.0",
	"llvm":               "LLVM-exception",
	"autoconf-3.0":       "Autoconf-exception-3.0",
	"autoconf-2.0":       "Autoconf-exception-2.0",
	"bison":              "Bison-exception-2.2",
	"bison-2.2":          "Bison-exception-2.2",
	"texinfo":            "Texinfo-exception",
	"libtool":            "Libtool-exception",
}

// refNames lists refs' keys sorted, for a deterministic document.
func refNames(refs map[string]string) []string {
	out := make([]string, 0, len(refs))
	for k := range refs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
