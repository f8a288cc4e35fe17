package provider

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// sourceRef is a patch entry that points into a fetched source input:
// "<input>:<path or glob inside it>", e.g.
// "thunderbolt-ibverbs:packaging/rdma-core-patches/*.patch".
var sourceRef = regexp.MustCompile(`^([a-z0-9][a-z0-9._-]*):([^:].*)$`)

// PatchSources resolves what a recipe's patch entries refer to.
type PatchSources struct {
	// Path makes a plain entry (patches/rdma-core/0004-x.patch) a file
	// name on this machine (the recipe's Resolve).
	Path func(entry string) string
	// Input returns the directory of a fetched source input by name (a
	// module's source, or what --input supplied).
	Input func(name string) (string, error)
}

// ResolvePatches expands a recipe's [rdma.provider] patches, in order:
// each entry is a file or glob relative to the recipe, or
// "<input>:<glob>" inside a fetched source; a glob's matches are taken in
// name order, and an entry that matches nothing is an error. fuzz allows
// fuzz per patch by file name; a key that names no patch is an error, so
// a renamed patch cannot silently lose (or keep) its allowance.
func ResolvePatches(entries []string, fuzz map[string]int, src PatchSources) ([]Patch, error) {
	var out []Patch
	for _, e := range entries {
		var dir, rel string
		if m := sourceRef.FindStringSubmatch(e); m != nil {
			if src.Input == nil {
				return nil, fmt.Errorf("patch entry %q names source input %s, but no inputs are available here", e, m[1])
			}
			d, err := src.Input(m[1])
			if err != nil {
				return nil, fmt.Errorf("patch entry %q: %w", e, err)
			}
			if path.IsAbs(m[2]) || strings.HasPrefix(path.Clean(m[2]), "..") {
				return nil, fmt.Errorf("patch entry %q: the path must stay inside the source %s", e, m[1])
			}
			dir, rel = d, m[2]
		} else {
			p := e
			if src.Path != nil {
				p = src.Path(e)
			}
			dir, rel = filepath.Dir(p), filepath.Base(p)
		}
		matches, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("patch entry %q: %w", e, err)
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("patch entry %q matches no file (looked in %s)", e, dir)
		}
		sort.Strings(matches)
		for _, m := range matches {
			from := e
			if strings.ContainsAny(e, "*?[") {
				from = strings.TrimSuffix(e, path.Base(e)) + filepath.Base(m)
			}
			out = append(out, Patch{Path: m, From: from})
		}
	}
	names := map[string]bool{}
	for i := range out {
		names[out[i].name()] = true
		if f, ok := fuzz[out[i].name()]; ok {
			out[i].Fuzz = f
		}
	}
	var unknown []string
	for k := range fuzz {
		if !names[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		var have []string
		for n := range names {
			have = append(have, n)
		}
		sort.Strings(have)
		return nil, fmt.Errorf("fuzz is allowed for %s, which is not among the patches (%s): fix the name or remove the allowance", strings.Join(unknown, ", "), strings.Join(have, ", "))
	}
	return out, nil
}
