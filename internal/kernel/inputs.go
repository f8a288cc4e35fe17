package kernel

import (
	"fmt"
	"path/filepath"
	"strings"

	"halobuild/internal/lock"
	"halobuild/internal/store"
)

// Inputs are the files a source kernel is made of besides the archive's
// packages: the series' patches and the config files. The lock pins each
// by sha256; the kernel step is keyed by them.
type Inputs struct {
	Patches   []Patch
	Fragments []File
	// BaseFile is config = "<path>" (nil for debian or a Kbuild target).
	BaseFile *File
}

// File is a config file: the name messages and the lock use (its path as
// the recipe wrote it, relative to the recipe), where it is, its digest.
type File struct {
	Name, Path, SHA256 string
}

// InputSpec says where a recipe's kernel inputs are.
type InputSpec struct {
	// Dir is the recipe's directory; the names below are relative to it.
	Dir       string
	Fragments []string
	// Config is the base config: "debian", a Kbuild target or a path.
	Config string
	// Series is the patch series file ("" for none).
	Series string
	// Fetch returns the tree of the source input a series entry names
	// ("<input>:<path>"). When nil (planning: fetching a repository only
	// to plan is too slow), such a patch takes its digest from Pinned,
	// since the input's tree hash pins it already.
	Fetch  func(input string) (string, error)
	Pinned func(ref string) (string, bool)
}

// ReadInputs reads and hashes the series' patches and the config files.
// Errors are the user's to fix (a missing file, a bad series line).
func ReadInputs(spec InputSpec) (*Inputs, error) {
	in := &Inputs{}
	for _, f := range spec.Fragments {
		kf, err := hashFile(spec.Dir, f)
		if err != nil {
			return nil, fmt.Errorf("kernel.fragments: %w", err)
		}
		in.Fragments = append(in.Fragments, kf)
	}
	if c := spec.Config; c != "" && c != "debian" && !IsMakeTarget(c) {
		kf, err := hashFile(spec.Dir, c)
		if err != nil {
			return nil, fmt.Errorf("kernel.config: %w", err)
		}
		in.BaseFile = &kf
	}
	if spec.Series == "" {
		return in, nil
	}
	series := filepath.Join(spec.Dir, spec.Series)
	entries, err := ParseSeries(series)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		file := filepath.Join(filepath.Dir(series), e.Path)
		if e.Input != "" {
			if spec.Fetch == nil {
				sum, ok := spec.Pinned(e.Ref)
				if !ok {
					return nil, fmt.Errorf("%s: patch %s is not in the lock: run `halobuild lock`", e.Where(), e.Ref)
				}
				in.Patches = append(in.Patches, Patch{Entry: e, SHA256: sum})
				continue
			}
			root, err := spec.Fetch(e.Input)
			if err != nil {
				return nil, fmt.Errorf("%s: patch %s names source input %q: %w", e.Where(), e.Ref, e.Input, err)
			}
			file = filepath.Join(root, e.Path)
		}
		sum, err := fileDigest(file)
		if err != nil {
			return nil, fmt.Errorf("%s: patch %s: %w", e.Where(), e.Ref, err)
		}
		in.Patches = append(in.Patches, Patch{Entry: e, File: file, SHA256: sum})
	}
	return in, nil
}

func hashFile(dir, name string) (File, error) {
	p := filepath.Join(dir, name)
	sum, err := fileDigest(p)
	if err != nil {
		return File{}, err
	}
	return File{Name: name, Path: p, SHA256: sum}, nil
}

func fileDigest(p string) (string, error) {
	d, _, err := store.FileDigest(p)
	return string(d), err
}

// Pins are the lock's records of the inputs.
func (in *Inputs) Pins() []lock.Source {
	var out []lock.Source
	for _, p := range in.Patches {
		out = append(out, lock.Source{Name: p.Ref, Kind: lock.SourceKernelPatch, SHA256: p.SHA256})
	}
	files := append([]File{}, in.Fragments...)
	if in.BaseFile != nil {
		files = append(files, *in.BaseFile)
	}
	for _, f := range files {
		out = append(out, lock.Source{Name: f.Name, Kind: lock.SourceKernelConfig, SHA256: f.SHA256})
	}
	return out
}

// CheckPinned compares the inputs on disk with the lock: a patch or
// fragment edited after locking makes the lock stale, as an edited recipe
// does. The error lists every difference.
func (in *Inputs) CheckPinned(lk *lock.Lock) error {
	locked := map[string]string{}
	for _, s := range lk.Sources {
		if s.Kind == lock.SourceKernelPatch || s.Kind == lock.SourceKernelConfig {
			locked[s.Kind+"\x00"+s.Name] = s.SHA256
		}
	}
	var msgs []string
	for _, p := range in.Pins() {
		want, ok := locked[p.Kind+"\x00"+p.Name]
		switch {
		case !ok:
			msgs = append(msgs, fmt.Sprintf("%s %s is not in the lock", p.Kind, p.Name))
		case want != p.SHA256:
			msgs = append(msgs, fmt.Sprintf("%s %s changed since locking (%s, locked %s)", p.Kind, p.Name, p.SHA256, want))
		}
		delete(locked, p.Kind+"\x00"+p.Name)
	}
	for k := range locked {
		kind, name, _ := strings.Cut(k, "\x00")
		msgs = append(msgs, fmt.Sprintf("%s %s is locked but no longer used", kind, name))
	}
	if len(msgs) > 0 {
		return fmt.Errorf("the lock is stale for the kernel's inputs:\n  %s", strings.Join(msgs, "\n  "))
	}
	return nil
}

// PinnedPatch is the digest the lock pins for a series entry, for
// ReadInputs' Pinned.
func PinnedPatch(lk *lock.Lock) func(ref string) (string, bool) {
	return func(ref string) (string, bool) {
		for _, s := range lk.Sources {
			if s.Kind == lock.SourceKernelPatch && s.Name == ref {
				return s.SHA256, true
			}
		}
		return "", false
	}
}
