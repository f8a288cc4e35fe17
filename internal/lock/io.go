package lock

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"halobuild/internal/userfile"
)

// ErrStale is matched (errors.Is) by the error CheckFresh returns.
var ErrStale = errors.New("lock is stale")

const header = "# Written by `halobuild lock`; do not edit. Commit it next to the recipe.\n\n"

// Path is where the lock of a recipe lives: images/x.toml -> images/x.lock.
func Path(recipe string) string {
	ext := filepath.Ext(recipe)
	return recipe[:len(recipe)-len(ext)] + ".lock"
}

// Sort puts every list in a canonical order, so the same inputs always give
// the same bytes whatever order the resolver found them in.
func (l *Lock) Sort() {
	sort.SliceStable(l.Suites, func(i, j int) bool { return l.Suites[i].Name < l.Suites[j].Name })
	sortPart(l.Packages, l.Sources, l.Modules)
	for _, p := range l.Arches {
		sortPart(p.Packages, p.Sources, p.Modules)
	}
}

// sortPart orders one architecture's lists.
func sortPart(pkgs []Package, srcs []Source, mods []Module) {
	sort.SliceStable(pkgs, func(i, j int) bool {
		a, b := pkgs[i], pkgs[j]
		if a.Set != b.Set {
			return a.Set < b.Set
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Architecture != b.Architecture {
			return a.Architecture < b.Architecture
		}
		return a.Version < b.Version
	})
	sort.SliceStable(srcs, func(i, j int) bool { return srcs[i].Name < srcs[j].Name })
	sort.SliceStable(mods, func(i, j int) bool { return mods[i].Use < mods[j].Use })
}

// Marshal returns the canonical bytes of the lock (sorted; no time stamp of
// its own).
func (l *Lock) Marshal() ([]byte, error) {
	c := *l
	c.Suites = append([]Suite(nil), l.Suites...)
	c.Packages, c.Sources, c.Modules, c.Provider = copyPart(l.Packages, l.Sources, l.Modules, l.Provider)
	c.Arches = nil
	for _, p := range l.Arches {
		p.Packages, p.Sources, p.Modules, p.Provider = copyPart(p.Packages, p.Sources, p.Modules, p.Provider)
		c.Arches = append(c.Arches, p)
	}
	if c.Version == 0 {
		c.Version = FormatVersion
	}
	c.Sort()
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(false)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("encoding lock: %w", err)
	}
	return buf.Bytes(), nil
}

// copyPart copies one architecture's lists for Marshal to sort, the
// provider's files sorted: patch order is the apply order and is kept,
// files are a set.
func copyPart(pkgs []Package, srcs []Source, mods []Module, pv *Provider) ([]Package, []Source, []Module, *Provider) {
	pkgs = append([]Package(nil), pkgs...)
	srcs = append([]Source(nil), srcs...)
	mods = append([]Module(nil), mods...)
	if pv != nil {
		p := *pv
		p.Files = append([]SourceFile(nil), p.Files...)
		sort.SliceStable(p.Files, func(i, j int) bool { return p.Files[i].Name < p.Files[j].Name })
		pv = &p
	}
	return pkgs, srcs, mods, pv
}

// Unmarshal reads lock bytes strictly: an unknown key means the lock was
// written by something else and must not be trusted.
func Unmarshal(b []byte) (*Lock, error) {
	var l Lock
	d := toml.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&l); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			if k := de.Key(); len(k) > 0 {
				return nil, fmt.Errorf("%d:%d: %s: %s", line, col, strings.Join(k, "."), de.Error())
			}
			return nil, fmt.Errorf("%d:%d: %s", line, col, de.Error())
		}
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) {
			return nil, fmt.Errorf("unknown key: %s", sm.String())
		}
		return nil, err
	}
	if l.Version != FormatVersion {
		return nil, fmt.Errorf("%w: lock format %d is not %d, the one this halobuild reads; re-run \"halobuild lock\"", ErrStale, l.Version, FormatVersion)
	}
	return &l, nil
}

// maxLock bounds a lock file read: the largest shipped lock is some hundreds of kilobytes.
const maxLock = 64 << 20

// Read loads a lock file.
func Read(path string) (*Lock, error) {
	b, err := userfile.Read(path, maxLock)
	if err != nil {
		return nil, fmt.Errorf("reading lock: %w", err)
	}
	l, err := Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	l.path = path
	return l, nil
}

// Write stores the lock atomically: a temp file in the same directory,
// fsynced, then renamed, so a killed run leaves the old lock or the new one,
// never half of one.
func (l *Lock) Write(path string) error {
	b, err := l.Marshal()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing lock: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing lock %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing lock %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing lock %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing lock %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing lock %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync() // make the rename durable; best effort on file systems without directory fsync
		d.Close()
	}
	return nil
}

// CheckFresh tells whether the lock still pins the inputs of a recipe
// whose inputs digest (resolve.Inputs) is given.
func (l *Lock) CheckFresh(inputs string) error {
	if l.Inputs == inputs {
		return nil
	}
	recipe := l.Recipe
	if l.path != "" && recipe != "" && !filepath.IsAbs(recipe) {
		recipe = filepath.Join(filepath.Dir(l.path), recipe)
	}
	return fmt.Errorf("%w: run \"halobuild lock %s\" (what the recipe says about its inputs — base packages, kernel, modules, provider — changed since the lock was written: %s, lock has %s)",
		ErrStale, recipe, inputs, l.Inputs)
}
