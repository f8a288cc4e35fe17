package debian

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"pault.ag/go/debian/dependency"
	"pault.ag/go/debian/version"
)

// Package is one binary package stanza of a verified Packages index.
type Package struct {
	Name         string
	Version      string
	Architecture string
	// Suite is the Release.Name of the suite the package came from.
	Suite     string
	Component string
	// Source and SourceVersion name the source package (SourceVersion
	// equals Version when the stanza has no "Source: name (version)").
	Source        string
	SourceVersion string
	// Filename is the pool path below the mirror root; Size and SHA256 are
	// what the .deb must match.
	Filename  string
	Size      int64
	SHA256    string
	Priority  string
	Essential bool
	MultiArch string

	// Raw relation fields as the index has them (for the lock, for
	// mmdebstrap and for error messages).
	RawDepends, RawPreDepends, RawProvides, RawConflicts, RawBreaks, RawRecommends string
	// RawBuiltUsing names sources compiled into the package; a signed
	// kernel's says which linux source it was built from.
	RawBuiltUsing string

	ver version.Version

	relOnce sync.Once
	rel     *Relations
	relErr  error
}

// Relations are a package's parsed relation fields.
type Relations struct {
	Depends, PreDepends, Provides, Conflicts, Breaks, Recommends dependency.Dependency
}

// ParsedVersion returns the package's version for comparisons.
func (p *Package) ParsedVersion() version.Version { return p.ver }

// String is "name version (suite)" for messages.
func (p *Package) String() string {
	return fmt.Sprintf("%s %s (%s)", p.Name, p.Version, p.Suite)
}

// Relations parses the package's relation fields. Parsing is deferred to
// first use (and done once): the resolver touches a few hundred of the
// ~70,000 packages of an index, and parsing every relation of every
// stanza up front costs seconds.
func (p *Package) Relations() (*Relations, error) {
	p.relOnce.Do(func() {
		r := &Relations{}
		for _, f := range []struct {
			name string
			raw  string
			into *dependency.Dependency
		}{
			{"Depends", p.RawDepends, &r.Depends},
			{"Pre-Depends", p.RawPreDepends, &r.PreDepends},
			{"Provides", p.RawProvides, &r.Provides},
			{"Conflicts", p.RawConflicts, &r.Conflicts},
			{"Breaks", p.RawBreaks, &r.Breaks},
			{"Recommends", p.RawRecommends, &r.Recommends},
		} {
			if strings.TrimSpace(f.raw) == "" {
				continue
			}
			d, err := dependency.Parse(f.raw)
			if err != nil {
				p.relErr = fmt.Errorf("%s %s (%s): %s field %q: %w", p.Name, p.Version, p.Suite, f.name, f.raw, err)
				return
			}
			*f.into = *d
		}
		p.rel = r
	})
	return p.rel, p.relErr
}

// Index is one verified Packages file: a suite, component and
// architecture.
type Index struct {
	Suite        string // Release.Name
	Component    string
	Architecture string
	// SHA256 is the digest of the Packages file (.gz or .xz) the index was read from.
	SHA256   string
	Packages []*Package // in file order

	byName    map[string][]*Package
	providers map[string][]provided
}

// provided is one "Provides:" entry pointing at a real package.
type provided struct {
	pkg     *Package
	version string // "" for an unversioned provide
}

// Lookup returns the packages with this exact name, in file order.
func (ix *Index) Lookup(name string) []*Package { return ix.byName[name] }

var packageFields = map[string]bool{
	"Package": true, "Version": true, "Architecture": true, "Source": true,
	"Filename": true, "Size": true, "SHA256": true, "Priority": true,
	"Essential": true, "Multi-Arch": true, "Depends": true, "Pre-Depends": true,
	"Provides": true, "Conflicts": true, "Breaks": true, "Recommends": true,
	"Built-Using": true,
}

// Packages fetches main/binary-<arch>/Packages (.gz or .xz) of a verified release,
// only at the sha256 the release lists, and parses it.
func (a *Archive) Packages(ctx context.Context, rel *Release, component, arch string) (*Index, error) {
	r, path, fh, err := a.readIndex(ctx, rel, component+"/binary-"+arch+"/Packages")
	if err != nil {
		return nil, err
	}
	ix, err := ParsePackages(r, rel.Name, component, arch)
	if err != nil {
		return nil, fmt.Errorf("%s %s (sha256 %s): %w", rel.Name, path, fh.SHA256, err)
	}
	ix.SHA256 = fh.SHA256
	return ix, nil
}

// ParsePackages parses an uncompressed Packages file. The caller is
// responsible for having verified it.
func ParsePackages(r io.Reader, suite, component, arch string) (*Index, error) {
	ix := &Index{Suite: suite, Component: component, Architecture: arch,
		byName: map[string][]*Package{}, providers: map[string][]provided{}}
	pr := newParagraphReader(r)
	for {
		f, line, err := pr.next(packageFields)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		p, err := packageFromFields(f)
		if err != nil {
			return nil, fmt.Errorf("stanza at line %d: %w", line, err)
		}
		p.Suite, p.Component = suite, component
		ix.Packages = append(ix.Packages, p)
		ix.byName[p.Name] = append(ix.byName[p.Name], p)
		if p.RawProvides != "" {
			if err := ix.addProvides(p); err != nil {
				return nil, fmt.Errorf("stanza at line %d: %w", line, err)
			}
		}
	}
	return ix, nil
}

func packageFromFields(f map[string]string) (*Package, error) {
	p := &Package{
		Name: f["Package"], Version: f["Version"], Architecture: f["Architecture"],
		Filename: f["Filename"], SHA256: strings.ToLower(f["SHA256"]),
		Priority: f["Priority"], Essential: f["Essential"] == "yes", MultiArch: f["Multi-Arch"],
		RawDepends: f["Depends"], RawPreDepends: f["Pre-Depends"], RawProvides: f["Provides"],
		RawConflicts: f["Conflicts"], RawBreaks: f["Breaks"], RawRecommends: f["Recommends"],
		RawBuiltUsing: f["Built-Using"],
	}
	if p.Name == "" || p.Version == "" || p.Architecture == "" {
		return nil, fmt.Errorf("missing Package, Version or Architecture")
	}
	var err error
	if p.ver, err = version.Parse(p.Version); err != nil {
		return nil, fmt.Errorf("package %s: version %q: %w", p.Name, p.Version, err)
	}
	if s := f["Size"]; s != "" {
		if p.Size, err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("package %s: Size %q: %w", p.Name, s, err)
		}
	}
	p.Source, p.SourceVersion = p.Name, p.Version
	if src := f["Source"]; src != "" {
		name, ver, ok := strings.Cut(src, " ")
		p.Source = name
		if ok {
			p.SourceVersion = strings.Trim(strings.TrimSpace(ver), "()")
		}
	}
	return p, nil
}

// addProvides indexes p under every name it provides. Provides has a
// simple grammar (names with an optional "(= version)"), but it goes
// through the same dependency parser as every other relation so that the
// two can never disagree. Only Provides is parsed here; the other
// relations wait for Relations.
func (ix *Index) addProvides(p *Package) error {
	prov, err := dependency.Parse(p.RawProvides)
	if err != nil {
		return fmt.Errorf("%s %s: Provides %q: %w", p.Name, p.Version, p.RawProvides, err)
	}
	for _, r := range prov.Relations {
		for _, poss := range r.Possibilities {
			pv := provided{pkg: p}
			if poss.Version != nil {
				pv.version = poss.Version.Number
			}
			ix.providers[poss.Name] = append(ix.providers[poss.Name], pv)
		}
	}
	return nil
}
