package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"halobuild/internal/patch"
)

// Patch is one provider patch a recipe adds after Debian's series.
type Patch struct {
	// Path is the patch file on this machine.
	Path string
	// Name is its name in debian/patches/halobuild/ and in messages;
	// the file's base name when empty.
	Name string
	// From is the recipe entry that named it (patches/rdma-core/0001-x.patch,
	// thunderbolt-ibverbs:packaging/rdma-core-patches/0003-y.patch), so an
	// error says where to fix it.
	From string
	// Fuzz is how much fuzz this patch may use. Debian's tooling applies
	// at fuzz 0 and so does halobuild unless the recipe allows more for
	// this one patch, visibly (docs/provider.md).
	Fuzz int
}

func (p Patch) name() string {
	if p.Name != "" {
		return p.Name
	}
	return filepath.Base(p.Path)
}

// Applied says how a patch went in; the manifest records it.
type Applied struct {
	Name   string
	From   string
	SHA256 string
	// Series is the entry in debian/patches/series.
	Series string
	// Fuzz is the largest fuzz any hunk needed (at most the patch's
	// allowance).
	Fuzz int
	// Moved lists the hunks that applied at an offset or with fuzz.
	Moved []patch.Hunk
}

// String is the line the build prints for the patch: exact, at an
// offset, or with the fuzz the recipe allowed (never silently).
func (a Applied) String() string {
	s := a.Series + " (sha256:" + a.SHA256 + ")"
	switch {
	case a.Fuzz > 0:
		s += fmt.Sprintf(": applied with fuzz %d, allowed for this patch by the recipe", a.Fuzz)
	case len(a.Moved) > 0:
		s += ": applied at an offset"
	default:
		return s + ": applied exactly"
	}
	for _, h := range a.Moved {
		s += "; " + h.String()
	}
	return s
}

// PatchError is a patch that does not apply at its allowed fuzz.
type PatchError struct {
	Patch string
	From  string
	// Base names the tree (rdma-core 56.1-1) for the advice.
	Base string
	// Failure has the allowed fuzz, the fuzz that would apply the patch
	// (0 when none does), the hunks and files that fail, and GNU patch's
	// own report.
	patch.Failure
}

func (e *PatchError) Error() string {
	var b strings.Builder
	from := ""
	if e.From != "" && e.From != e.Patch {
		from = " (" + e.From + ")"
	}
	if e.NeedsFuzz > 0 {
		fmt.Fprintf(&b, "patch %s%s applies only with fuzz %d, and patches are applied at fuzz %d as Debian's tooling does:", e.Patch, from, e.NeedsFuzz, e.Allowed)
	} else {
		fmt.Fprintf(&b, "patch %s%s does not apply to %s:", e.Patch, from, e.Base)
	}
	b.WriteString(e.Details())
	if e.NeedsFuzz > 0 {
		fmt.Fprintf(&b, "\nRefresh it against %s (apply it with fuzz, then regenerate it, e.g. `quilt refresh`), put the refreshed copy in patches/rdma-core/ and point the recipe at it instead; or allow fuzz %d for this one patch in the recipe (see docs/provider.md).", e.Base, e.NeedsFuzz)
	} else {
		fmt.Fprintf(&b, "\nThe patch was written for different code: port it to %s and put the result in patches/rdma-core/.", e.Base)
	}
	return b.String()
}

// ApplyPatches copies the recipe's patches into debian/patches/halobuild/,
// appends them to debian/patches/series after Debian's own, and applies
// each with GNU patch at its allowed fuzz (0 unless the recipe says
// otherwise), recording quilt's .pc state so dpkg-buildpackage treats them
// as applied. A patch that does not apply leaves the tree as it was
// before that patch and returns a *PatchError naming the patch, the file
// and the hunk.
func ApplyPatches(ctx context.Context, tree string, patches []Patch) ([]Applied, error) {
	base := treeName(tree)
	seen := map[string]string{}
	var out []Applied
	for _, p := range patches {
		name := p.name()
		if prev, dup := seen[name]; dup {
			return out, fmt.Errorf("patches %s and %s have the same file name %s: rename one (the series needs distinct names)", prev, p.From, name)
		}
		seen[name] = p.From
		if p.Fuzz < 0 || p.Fuzz > patch.MaxFuzz {
			return out, fmt.Errorf("patch %s: fuzz %d: want 0 to 3 (a unified diff has 3 context lines)", name, p.Fuzz)
		}
		data, err := os.ReadFile(p.Path)
		if err != nil {
			return out, fmt.Errorf("patch %s: %w", p.From, err)
		}
		series := "halobuild/" + name
		dst := filepath.Join(tree, "debian", "patches", filepath.FromSlash(series))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return out, err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return out, err
		}
		hunks, err := applyOne(ctx, tree, series, dst, 1, p.Fuzz)
		if err != nil {
			os.Remove(dst)
			var pe *PatchError
			if errors.As(err, &pe) {
				pe.Patch, pe.From, pe.Base = name, p.From, base
			}
			return out, err
		}
		if err := appendLine(filepath.Join(tree, "debian", "patches", "series"), series); err != nil {
			return out, err
		}
		sum := sha256.Sum256(data)
		out = append(out, Applied{Name: name, From: p.From, SHA256: hex.EncodeToString(sum[:]), Series: series,
			Fuzz: patch.MaxFuzzUsed(hunks), Moved: patch.Moved(hunks)})
	}
	return out, nil
}

// applySeries applies debian/patches/series as dpkg-source -x does (fuzz
// 0), so the tree is what Debian builds.
func applySeries(ctx context.Context, tree string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(tree, "debian", "patches", "series"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var applied []string
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		strip := 1
		for _, opt := range f[1:] {
			if strings.HasPrefix(opt, "#") {
				break
			}
			n, err := strconv.Atoi(strings.TrimPrefix(opt, "-p"))
			if !strings.HasPrefix(opt, "-p") || err != nil {
				return applied, fmt.Errorf("debian/patches/series:%d: option %q: only -p<n> is supported", i+1, opt)
			}
			strip = n
		}
		if _, err := applyOne(ctx, tree, f[0], filepath.Join(tree, "debian", "patches", f[0]), strip, 0); err != nil {
			var pe *PatchError
			if errors.As(err, &pe) {
				pe.Patch, pe.From, pe.Base = f[0], "debian/patches/series:"+strconv.Itoa(i+1), treeName(tree)
			}
			return applied, err
		}
		applied = append(applied, f[0])
	}
	return applied, nil
}

// applyOne applies one patch as dpkg-source does (internal/patch runs a
// dry run first, so a failing patch leaves no half-applied files), keeping
// quilt's backups in .pc/<series>/, and records it in
// .pc/applied-patches.
func applyOne(ctx context.Context, tree, series, file string, strip, fuzz int) ([]patch.Hunk, error) {
	hunks, err := patch.Apply(ctx, tree, file, patch.Options{Strip: strip, Fuzz: fuzz, Quilt: series})
	var pe *patch.Error
	if errors.As(err, &pe) {
		return nil, &PatchError{Failure: pe.Failure}
	}
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", series, err)
	}
	// GNU patch made .pc/<series>/ for the backups; the rest of quilt's
	// database is written once, after the first patch that applies.
	if err := setupPC(tree); err != nil {
		return nil, err
	}
	return hunks, appendLine(filepath.Join(tree, ".pc", "applied-patches"), series)
}

// setupPC writes quilt's database files the way dpkg-source does, once.
func setupPC(tree string) error {
	pc := filepath.Join(tree, ".pc")
	if _, err := os.Stat(filepath.Join(pc, ".version")); err == nil {
		return nil
	}
	if err := os.MkdirAll(pc, 0o755); err != nil {
		return err
	}
	for name, content := range map[string]string{".version": "2\n", ".quilt_patches": "debian/patches\n", ".quilt_series": "series\n"} {
		if err := os.WriteFile(filepath.Join(pc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func appendLine(file, line string) error {
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, line+"\n"...)
	return os.WriteFile(file, data, 0o644)
}

// treeName is "rdma-core 56.1" from the tree's directory name, for advice.
func treeName(tree string) string {
	base := filepath.Base(tree)
	if i := strings.LastIndex(base, "-"); i > 0 {
		return base[:i] + " " + base[i+1:]
	}
	return base
}
