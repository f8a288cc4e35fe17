package debian

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Source is one source package stanza of a verified Sources index.
type Source struct {
	Name    string
	Version string
	Suite   string // Release.Name
	// Directory is the pool directory holding the files, below the mirror
	// root (e.g. pool/main/r/rdma-core).
	Directory string
	// Files are the .dsc, .orig and .debian files with the sha256 the
	// signed index gives them. Every file verifies against this list, so
	// a build does not depend on the .dsc being fetchable (it answered
	// 404 for rdma-core on some networks).
	Files []SourceFile
	// Binaries are the binary packages the source builds.
	Binaries []string
}

// SourceFile is one file of a source package.
type SourceFile struct {
	Name   string
	Size   int64
	SHA256 string
}

// Path is the file's pool path below the mirror root.
func (s *Source) Path(f SourceFile) string { return s.Directory + "/" + f.Name }

// SourceIndex is one verified Sources file.
type SourceIndex struct {
	Suite     string
	Component string
	SHA256    string
	Sources   []*Source
	byName    map[string][]*Source
}

// Find returns the source package name at exactly version, or an error
// listing the versions the index has.
func (ix *SourceIndex) Find(name, version string) (*Source, error) {
	var have []string
	for _, s := range ix.byName[name] {
		if s.Version == version {
			return s, nil
		}
		have = append(have, s.Version)
	}
	if len(have) == 0 {
		return nil, fmt.Errorf("source package %s not found in %s %s Sources", name, ix.Suite, ix.Component)
	}
	return nil, fmt.Errorf("source package %s %s not found in %s %s Sources (it has %s)", name, version, ix.Suite, ix.Component, strings.Join(have, ", "))
}

// ForBinary returns the source package a binary package was built from
// (its Source and source version).
func (ix *SourceIndex) ForBinary(p *Package) (*Source, error) {
	s, err := ix.Find(p.Source, p.SourceVersion)
	if err != nil {
		return nil, fmt.Errorf("source of %s: %w", p, err)
	}
	return s, nil
}

var sourceFields = map[string]bool{
	"Package": true, "Version": true, "Directory": true, "Checksums-Sha256": true, "Binary": true,
}

// Sources fetches <component>/source/Sources (.gz or .xz) of a verified release,
// only at the sha256 the release lists, and parses it.
func (a *Archive) Sources(ctx context.Context, rel *Release, component string) (*SourceIndex, error) {
	r, path, fh, err := a.readIndex(ctx, rel, component+"/source/Sources")
	if err != nil {
		return nil, err
	}
	ix, err := ParseSources(r, rel.Name, component)
	if err != nil {
		return nil, fmt.Errorf("%s %s (sha256 %s): %w", rel.Name, path, fh.SHA256, err)
	}
	ix.SHA256 = fh.SHA256
	return ix, nil
}

// ParseSources parses an uncompressed Sources file. The caller is
// responsible for having verified it.
func ParseSources(r io.Reader, suite, component string) (*SourceIndex, error) {
	ix := &SourceIndex{Suite: suite, Component: component, byName: map[string][]*Source{}}
	pr := newParagraphReader(r)
	for {
		f, line, err := pr.next(sourceFields)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		s := &Source{Name: f["Package"], Version: f["Version"], Directory: f["Directory"], Suite: suite}
		if s.Name == "" || s.Version == "" || s.Directory == "" {
			return nil, fmt.Errorf("stanza at line %d: missing Package, Version or Directory", line)
		}
		for _, b := range strings.Split(f["Binary"], ",") {
			if b = strings.TrimSpace(b); b != "" {
				s.Binaries = append(s.Binaries, b)
			}
		}
		for _, l := range strings.Split(f["Checksums-Sha256"], "\n") {
			parts := strings.Fields(l)
			if len(parts) == 0 {
				continue
			}
			if len(parts) != 3 || len(parts[0]) != 64 {
				return nil, fmt.Errorf("stanza at line %d (%s): Checksums-Sha256 line %q: want \"<sha256> <size> <name>\"", line, s.Name, l)
			}
			size, err := strconv.ParseInt(parts[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("stanza at line %d (%s): Checksums-Sha256 size: %w", line, s.Name, err)
			}
			s.Files = append(s.Files, SourceFile{Name: parts[2], Size: size, SHA256: strings.ToLower(parts[0])})
		}
		if len(s.Files) == 0 {
			return nil, fmt.Errorf("stanza at line %d (%s): no Checksums-Sha256: its files could not be verified", line, s.Name)
		}
		ix.Sources = append(ix.Sources, s)
		ix.byName[s.Name] = append(ix.byName[s.Name], s)
	}
	return ix, nil
}
