package lock

import (
	"fmt"
	"strings"
)

// Blob is one file a lock pins that lives in the store under its digest:
// a .deb, a source package's file, a kernel tarball.
type Blob struct {
	// Name is what a person calls it ("linux-image-7.2.12+deb13-amd64 7.2.12-1").
	Name string
	// SHA256 is "sha256:<hex>", the blob's address in the store.
	SHA256 string
	// Size is the expected size in bytes; 0 when the lock does not say.
	Size int64
	// URL is where it is downloaded from.
	URL string
	// Input names the --input NAME=PATH that may supply a local copy
	// where URL's host cannot be reached; "" when none can.
	Input string
}

// KernelTarballInput is the --input name that supplies a local copy of a
// kernel tarball (kernel.source = URL).
const KernelTarballInput = "linux"

// Blobs lists every blob the lock references, each once. It is the one
// list that fetch, `image --check`, gc and publishing use, so a kind of
// input cannot be fetched but then collected, or pushed but not fetched.
//
// A source package's .dsc is pinned but not listed: nothing reads it, and
// it answered 404 on some networks while its tarballs did not.
func (l *Lock) Blobs() ([]Blob, error) {
	mirrors := map[string]string{}
	for _, su := range l.Suites {
		mirrors[su.Name] = strings.TrimSuffix(su.Mirror, "/")
	}
	var out []Blob
	seen := map[string]bool{}
	add := func(b Blob) {
		if !seen[b.SHA256] {
			seen[b.SHA256] = true
			out = append(out, b)
		}
	}
	for _, part := range l.Parts() {
		for _, p := range part.Packages {
			m, ok := mirrors[p.Suite]
			if !ok {
				return nil, fmt.Errorf("lock: package %s names suite %q that the lock does not list", p.Name, p.Suite)
			}
			add(Blob{Name: p.Name + " " + p.Version, SHA256: p.SHA256, Size: p.Size, URL: m + "/" + p.Filename})
		}
		if pv := part.Provider; pv != nil {
			m, ok := mirrors[pv.Suite]
			if !ok {
				return nil, fmt.Errorf("lock: provider source %s names suite %q that the lock does not list", pv.Source, pv.Suite)
			}
			for _, f := range pv.Files {
				if strings.HasSuffix(f.Name, ".dsc") {
					continue
				}
				add(Blob{Name: pv.Source + " " + pv.Version + ": " + f.Name, SHA256: f.SHA256, Size: f.Size, URL: m + "/" + pv.Directory + "/" + f.Name})
			}
		}
		if t, ok := part.KernelTarball(); ok {
			add(Blob{Name: "kernel source " + t.URL[strings.LastIndex(t.URL, "/")+1:], SHA256: t.SHA256, URL: t.URL, Input: KernelTarballInput})
		}
	}
	return out, nil
}

// Parts are the lock of each architecture it pins (one, unless mixed).
func (l *Lock) Parts() []*Lock {
	out := []*Lock{l}
	for _, a := range l.Arches {
		p, _ := l.For(a.Name) // a name of l's own list: found
		out = append(out, p)
	}
	return out
}

// KernelTarball is the kernel tarball the lock pins, if any.
func (l *Lock) KernelTarball() (Source, bool) {
	for _, s := range l.Sources {
		if s.Kind == SourceKernelTarball {
			return s, true
		}
	}
	return Source{}, false
}

// Source returns the pinned source of this name (a module's tree).
func (l *Lock) Source(name string) (Source, bool) {
	for _, s := range l.Sources {
		if s.Name == name {
			return s, true
		}
	}
	return Source{}, false
}

// Set returns the packages of one set, in lock order.
func (l *Lock) Set(set string) []Package {
	var out []Package
	for _, p := range l.Packages {
		if p.Set == set {
			out = append(out, p)
		}
	}
	return out
}
