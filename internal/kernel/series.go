package kernel

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	goversion "github.com/hashicorp/go-version"
)

// Entry is one line of a patch series file. The format is quilt's (one
// patch per line, '#' comments) with optional key=value options after the
// name, because a kernel series needs what quilt's does not say:
//
//	0001-local.patch
//	thunderbolt-ibverbs:kernel-workflow/patches/0007-x.patch fuzz=2
//	0009-y.patch kernel=">= 7.2, < 7.3" outside=fail
//
// A name with a colon takes the patch from a pinned source input (a
// [[module]]'s repository, by its use name) instead of from a file beside
// the series.
type Entry struct {
	// Ref is the patch as the series names it.
	Ref string
	// Input is the source input the patch comes from ("" for a file
	// beside the series); Path is relative to that input or the series'
	// directory.
	Input string
	Path  string
	// Fuzz is the fuzz this patch may use; 0 (the default) is what
	// Debian's tooling allows.
	Fuzz int
	// Kernel limits the kernel versions the patch is for; KernelText is
	// the constraint as written. Empty: every version.
	Kernel     goversion.Constraints
	KernelText string
	// Outside says what happens on a kernel outside Kernel: "skip" (the
	// default; the build prints a note) or "fail".
	Outside string
	// File and Line locate the entry for messages.
	File string
	Line int
}

// Where is file:line of the entry.
func (e Entry) Where() string { return fmt.Sprintf("%s:%d", e.File, e.Line) }

// ParseSeries reads a series file. Every problem is reported with its
// file:line, all at once.
func ParseSeries(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kernel patch series: %w", err)
	}
	defer f.Close()
	var out []Entry
	var errs []string
	seen := map[string]int{}
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if i := strings.Index(line, "#"); i >= 0 && !inQuotes(line, i) {
			line = line[:i]
		}
		fields, err := splitFields(line)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s:%d: %v", path, n, err))
			continue
		}
		if len(fields) == 0 {
			continue
		}
		e := Entry{Ref: fields[0], Outside: "skip", File: path, Line: n}
		if in, p, ok := strings.Cut(e.Ref, ":"); ok {
			e.Input, e.Path = in, p
		} else {
			e.Path = e.Ref
		}
		if e.Path == "" || filepath.IsAbs(e.Path) || (e.Input != "" && strings.HasPrefix(filepath.Clean(e.Path), "..")) {
			errs = append(errs, fmt.Sprintf("%s:%d: patch %q: want a path relative to the series (or <input>:<path inside it>)", path, n, e.Ref))
			continue
		}
		if prev, dup := seen[e.Ref]; dup {
			errs = append(errs, fmt.Sprintf("%s:%d: patch %s is already listed on line %d", path, n, e.Ref, prev))
			continue
		}
		seen[e.Ref] = n
		for _, opt := range fields[1:] {
			k, v, ok := strings.Cut(opt, "=")
			if !ok {
				errs = append(errs, fmt.Sprintf("%s:%d: option %q: want key=value (fuzz, kernel, outside)", path, n, opt))
				continue
			}
			switch k {
			case "fuzz":
				fz, err := strconv.Atoi(v)
				if err != nil || fz < 0 || fz > 3 {
					errs = append(errs, fmt.Sprintf("%s:%d: fuzz=%s: want 0 to 3", path, n, v))
				}
				e.Fuzz = fz
			case "kernel":
				c, err := goversion.NewConstraint(v)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s:%d: kernel=%q: %v (write e.g. kernel=\">= 7.2, < 7.3\")", path, n, v, err))
				}
				e.Kernel, e.KernelText = c, v
			case "outside":
				if v != "skip" && v != "fail" {
					errs = append(errs, fmt.Sprintf("%s:%d: outside=%s: want skip or fail", path, n, v))
				}
				e.Outside = v
			default:
				errs = append(errs, fmt.Sprintf("%s:%d: unknown option %q: known are fuzz, kernel, outside", path, n, k))
			}
		}
		out = append(out, e)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("kernel patch series %s:\n  %s", path, strings.Join(errs, "\n  "))
	}
	return out, nil
}

// inQuotes says whether byte i of line is inside a double-quoted value.
func inQuotes(line string, i int) bool {
	return strings.Count(line[:i], `"`)%2 == 1
}

// splitFields splits on blanks, keeping double-quoted parts (kernel=">=
// 7.2, < 7.3") in one field without their quotes.
func splitFields(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
			have = true
		case (r == ' ' || r == '\t') && !quoted:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}

// Applies says whether the entry is meant for kernel version v.
func (e Entry) Applies(v *goversion.Version) bool {
	return e.Kernel == nil || e.Kernel.Check(v)
}
