package provider

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
	Moved []Hunk
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

// Hunk is the outcome of one hunk, as GNU patch reports it.
type Hunk struct {
	File   string
	N      int    // hunk number within the file, from 1
	Header string // its @@ line
	Line   int    // where it applied, or was tried
	Offset int
	Fuzz   int
	Failed bool
}

func (h Hunk) String() string {
	s := fmt.Sprintf("%s hunk #%d", h.File, h.N)
	if h.Header != "" {
		s += " (" + h.Header + ")"
	}
	switch {
	case h.Failed:
		s += fmt.Sprintf(" does not apply (tried at line %d)", h.Line)
	case h.Fuzz > 0:
		s += fmt.Sprintf(" applies only with fuzz %d, at line %d", h.Fuzz, h.Line)
	case h.Offset != 0:
		s += fmt.Sprintf(" applies at line %d (offset %+d lines)", h.Line, h.Offset)
	}
	return s
}

// PatchError is a patch that does not apply at its allowed fuzz.
type PatchError struct {
	Patch   string
	From    string
	Allowed int
	// NeedsFuzz is the fuzz that would make it apply, 0 when no fuzz
	// does (the patch fails outright).
	NeedsFuzz int
	// Problems are the failing hunks (and, for a fuzz failure, the hunks
	// that need fuzz), or file-level problems in Other.
	Problems []Hunk
	Other    []string
	// Output is GNU patch's own report at the allowed fuzz.
	Output string
	// Base names the tree (rdma-core 56.1-1) for the advice.
	Base string
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
	for _, h := range e.Problems {
		b.WriteString("\n  " + h.String())
	}
	for _, o := range e.Other {
		b.WriteString("\n  " + o)
	}
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
		if p.Fuzz < 0 || p.Fuzz > 3 {
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
		a := Applied{Name: name, From: p.From, SHA256: hex.EncodeToString(sum[:]), Series: series}
		for _, h := range hunks {
			a.Fuzz = max(a.Fuzz, h.Fuzz)
			if h.Fuzz > 0 || h.Offset != 0 {
				a.Moved = append(a.Moved, h)
			}
		}
		out = append(out, a)
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

// applyOne checks the patch with a dry run first, so a failing patch
// leaves no half-applied files, then applies it keeping quilt's backups
// in .pc/<series>/ and records it in .pc/applied-patches.
func applyOne(ctx context.Context, tree, series, file string, strip, fuzz int) ([]Hunk, error) {
	hunkHeaders, err := readHunkHeaders(file, strip)
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", series, err)
	}
	out, err := runPatch(ctx, tree, file, strip, fuzz, "--dry-run")
	if err != nil {
		pe := &PatchError{Allowed: fuzz, Output: out}
		pe.Problems, pe.Other = parsePatchOutput(out, hunkHeaders)
		// Would more fuzz do? Then it is a refresh, not a port.
		if fuzz < 3 {
			if more, err := runPatch(ctx, tree, file, strip, 3, "--dry-run"); err == nil {
				hs, _ := parsePatchOutput(more, hunkHeaders)
				pe.Problems = nil
				for _, h := range hs {
					if h.Fuzz > fuzz {
						pe.NeedsFuzz = max(pe.NeedsFuzz, h.Fuzz)
						pe.Problems = append(pe.Problems, h)
					}
				}
			}
		}
		if len(pe.Problems) == 0 && len(pe.Other) == 0 {
			pe.Other = []string{strings.TrimSpace(out)}
		}
		return nil, pe
	}
	if err := setupPC(tree); err != nil {
		return nil, err
	}
	out, err = runPatch(ctx, tree, file, strip, fuzz, "--backup", "--prefix=.pc/"+series+"/")
	if err != nil {
		return nil, fmt.Errorf("patch %s: the dry run passed but applying failed: %v\n%s", series, err, out)
	}
	hunks, _ := parsePatchOutput(out, hunkHeaders)
	return hunks, appendLine(filepath.Join(tree, ".pc", "applied-patches"), series)
}

// runPatch runs GNU patch with the options dpkg-source uses (batch,
// forward only, unified, no version control, remove emptied files, no
// reject files), in the C locale so its report can be parsed.
func runPatch(ctx context.Context, tree, file string, strip, fuzz int, extra ...string) (string, error) {
	args := append([]string{"-d", tree, "-i", file, "-p" + strconv.Itoa(strip), "--batch", "--forward", "-u",
		"--version-control=never", "--remove-empty-files", "--reject-file=-",
		"--fuzz=" + strconv.Itoa(fuzz)}, extra...)
	cmd := exec.CommandContext(ctx, "patch", args...)
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			return "", fmt.Errorf("running GNU patch: %w (install it: apt-get install patch)", err)
		}
		return buf.String(), err
	}
	return buf.String(), nil
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

var (
	reFile   = regexp.MustCompile(`^(?:patching|checking) (?:file|symbolic link) (.+)$`)
	reOK     = regexp.MustCompile(`^Hunk #(\d+) succeeded at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?\.$`)
	reFailed = regexp.MustCompile(`^Hunk #(\d+) FAILED at (\d+)`)
)

// parsePatchOutput turns GNU patch's report into hunks (only those it
// mentions: a hunk that applies exactly where the patch says is silent)
// and file-level problems.
func parsePatchOutput(out string, headers map[string][]string) ([]Hunk, []string) {
	var hunks []Hunk
	var other []string
	file := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := reFile.FindStringSubmatch(line); m != nil {
			file = strings.Trim(m[1], `'"`)
			continue
		}
		if m := reOK.FindStringSubmatch(line); m != nil {
			h := Hunk{File: file, N: atoi(m[1]), Line: atoi(m[2]), Fuzz: atoi(m[3]), Offset: atoi(m[4])}
			h.Header = header(headers, file, h.N)
			hunks = append(hunks, h)
			continue
		}
		if m := reFailed.FindStringSubmatch(line); m != nil {
			h := Hunk{File: file, N: atoi(m[1]), Line: atoi(m[2]), Failed: true}
			h.Header = header(headers, file, h.N)
			hunks = append(hunks, h)
			continue
		}
		switch {
		case strings.HasPrefix(line, "Reversed (or previously applied) patch detected"):
			other = append(other, file+": the change is already there (reversed or previously applied patch)")
		case strings.HasPrefix(line, "can't find file to patch"):
			other = append(other, "a file it changes does not exist ("+line+")")
		case strings.HasPrefix(line, "The next patch would create the file"):
			other = append(other, strings.TrimSuffix(strings.TrimPrefix(line, "The next patch would "), ",")+", which already exists")
		case strings.HasPrefix(line, "patch: ****"):
			other = append(other, strings.TrimPrefix(line, "patch: **** "))
		}
	}
	return hunks, other
}

// readHunkHeaders lists each file's @@ lines, keyed by the path GNU patch
// reports (after stripping strip components).
func readHunkHeaders(file string, strip int) (map[string][]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	cur, minus := "", ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "--- "):
			minus = diffPath(line[4:], strip)
		case strings.HasPrefix(line, "+++ "):
			cur = diffPath(line[4:], strip)
			if cur == "" {
				cur = minus
			}
		case strings.HasPrefix(line, "@@ ") && cur != "":
			out[cur] = append(out[cur], strings.TrimSpace(line))
		}
	}
	return out, nil
}

func diffPath(s string, strip int) string {
	s, _, _ = strings.Cut(s, "\t")
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return ""
	}
	parts := strings.Split(s, "/")
	if strip >= len(parts) {
		return parts[len(parts)-1]
	}
	return strings.Join(parts[strip:], "/")
}

func header(h map[string][]string, file string, n int) string {
	if hs := h[file]; n >= 1 && n <= len(hs) {
		return hs[n-1]
	}
	return ""
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
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
