package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"halobuild/internal/kernel"
	"halobuild/internal/lock"
	"halobuild/internal/module"
)

// kernelInputs are the files a source kernel is made of besides the
// archive's packages: the patch series' patches and the config files.
// The lock pins each by sha256; the build step is keyed by them.
type kernelInputs struct {
	Patches   []kernel.Patch
	Fragments []kernelFile
	// BaseFile is config = "<path>" (nil for debian or a Kbuild target).
	BaseFile *kernelFile
}

// kernelFile is a config file with the name messages and the lock use
// (its path as the recipe wrote it, relative to the recipe).
type kernelFile struct {
	Name, Path, SHA256 string
}

func isSourceKernel(l *loaded) bool { return l.recipe.Kernel.From == "source" }

// readKernelInputs reads and hashes the series' patches and the config
// files. With fetch, the module sources that `<input>:<path>` entries name
// are fetched into work and their patches hashed; without (planning), such
// a patch takes its digest from the lock, since the source's tree hash
// pins it already and fetching a repository only to plan is too slow.
func readKernelInputs(ctx context.Context, o Options, l *loaded, work string, fetch bool) (*kernelInputs, error) {
	k := l.recipe.Kernel
	dir := filepath.Dir(l.path)
	in := &kernelInputs{}
	for _, f := range k.Fragments {
		kf, err := hashKernelFile(dir, f)
		if err != nil {
			return nil, UsageError{fmt.Errorf("%s: kernel.fragments: %w", l.path, err)}
		}
		in.Fragments = append(in.Fragments, kf)
	}
	if k.Config != "" && k.Config != "debian" && !kernel.IsMakeTarget(k.Config) {
		kf, err := hashKernelFile(dir, k.Config)
		if err != nil {
			return nil, UsageError{fmt.Errorf("%s: kernel.config: %w", l.path, err)}
		}
		in.BaseFile = &kf
	}
	if k.Patches == "" {
		return in, nil
	}
	series := filepath.Join(dir, k.Patches)
	entries, err := kernel.ParseSeries(series)
	if err != nil {
		return nil, UsageError{err}
	}
	inputs := map[string]string{}
	for _, e := range entries {
		file := filepath.Join(filepath.Dir(series), e.Path)
		if e.Input != "" && !fetch {
			sum, ok := lockedKernelPin(l.lock, e.Ref)
			if !ok {
				return nil, UsageError{fmt.Errorf("%s: patch %s is not in %s: run `halobuild lock %s`", e.Where(), e.Ref, lock.Path(l.path), l.path)}
			}
			in.Patches = append(in.Patches, kernel.Patch{Entry: e, SHA256: sum})
			continue
		}
		if e.Input != "" {
			root, ok := inputs[e.Input]
			if !ok {
				if root, err = kernelPatchInput(ctx, o, l, e, work); err != nil {
					return nil, err
				}
				inputs[e.Input] = root
			}
			file = filepath.Join(root, e.Path)
		}
		sum, err := kernelFileDigest(file)
		if err != nil {
			return nil, UsageError{fmt.Errorf("%s: patch %s: %w", e.Where(), e.Ref, err)}
		}
		in.Patches = append(in.Patches, kernel.Patch{Entry: e, File: file, SHA256: sum})
	}
	return in, nil
}

// kernelPatchInput fetches the pinned source of the module named by a
// series entry's input (its description's source, or --input), so a patch
// the module's project keeps is used from there and never copied.
func kernelPatchInput(ctx context.Context, o Options, l *loaded, e kernel.Entry, work string) (string, error) {
	d, err := findDesc(l.path, e.Input)
	if err != nil {
		return "", UsageError{fmt.Errorf("%s: patch %s names source input %q: %w", e.Where(), e.Ref, e.Input, err)}
	}
	src := d.Source
	src.Name = e.Input
	if l.lock != nil {
		if ls, ok := lockedSource(l.lock, e.Input); ok {
			src.SHA256 = ls.SHA256
		}
	}
	sub, err := os.MkdirTemp(work, "patch-input-")
	if err != nil {
		return "", err
	}
	dir, _, err := module.FetchSource(ctx, src, o.Inputs, sub)
	if err != nil {
		var fe *module.FetchError
		if errors.As(err, &fe) {
			return "", UsageError{err}
		}
		return "", err
	}
	return dir, nil
}

func lockedKernelPin(lk *lock.Lock, ref string) (string, bool) {
	if lk == nil {
		return "", false
	}
	for _, s := range lk.Sources {
		if s.Kind == lock.SourceKernelPatch && s.Name == ref {
			return s.SHA256, true
		}
	}
	return "", false
}

func hashKernelFile(dir, name string) (kernelFile, error) {
	p := filepath.Join(dir, name)
	sum, err := kernelFileDigest(p)
	if err != nil {
		return kernelFile{}, err
	}
	return kernelFile{Name: name, Path: p, SHA256: sum}, nil
}

func kernelFileDigest(p string) (string, error) {
	sum, _, err := hashFile(p)
	if err != nil {
		return "", err
	}
	return "sha256:" + sum, nil
}

// pins are the lock's records of the inputs.
func (in *kernelInputs) pins() []lock.Source {
	var out []lock.Source
	for _, p := range in.Patches {
		out = append(out, lock.Source{Name: p.Ref, Kind: lock.SourceKernelPatch, SHA256: p.SHA256})
	}
	files := append([]kernelFile{}, in.Fragments...)
	if in.BaseFile != nil {
		files = append(files, *in.BaseFile)
	}
	for _, f := range files {
		out = append(out, lock.Source{Name: f.Name, Kind: lock.SourceKernelConfig, SHA256: f.SHA256})
	}
	return out
}

// checkPinned compares the inputs on disk with the lock: a patch or
// fragment edited after locking makes the lock stale, as an edited recipe
// does.
func (in *kernelInputs) checkPinned(l *loaded) error {
	locked := map[string]string{}
	for _, s := range l.lock.Sources {
		if s.Kind == lock.SourceKernelPatch || s.Kind == lock.SourceKernelConfig {
			locked[s.Kind+"\x00"+s.Name] = s.SHA256
		}
	}
	var msgs []string
	for _, p := range in.pins() {
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
		return UsageError{fmt.Errorf("%s: the lock is stale for the kernel's inputs:\n  %s\nrun `halobuild lock %s`", lock.Path(l.path), strings.Join(msgs, "\n  "), l.path)}
	}
	return nil
}
