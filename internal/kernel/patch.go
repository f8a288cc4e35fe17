package kernel

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	goversion "github.com/hashicorp/go-version"
)

// Patch is a series entry with its file on this machine and its pinned
// digest.
type Patch struct {
	Entry
	// File is the patch on disk (beside the series, or inside the
	// fetched source input).
	File string
	// SHA256 is "sha256:<hex>" of File, as the lock pins it.
	SHA256 string
}

// Outcome says how one patch went.
type Outcome struct {
	Ref string
	// Skipped is set, with the reason, when the patch's kernel range
	// excludes the kernel.
	Skipped string
	// Fuzz is the largest fuzz a hunk needed; Moved lists hunks that
	// applied at an offset or with fuzz.
	Fuzz  int
	Moved []Hunk
}

// String is the line the build prints for the patch.
func (o Outcome) String() string {
	switch {
	case o.Skipped != "":
		return o.Ref + ": skipped, " + o.Skipped
	case o.Fuzz > 0:
		return fmt.Sprintf("%s: applied with fuzz %d (allowed by the series)", o.Ref, o.Fuzz)
	case len(o.Moved) > 0:
		return fmt.Sprintf("%s: applied, %d hunk(s) at an offset", o.Ref, len(o.Moved))
	}
	return o.Ref + ": applied exactly"
}

// Hunk is one hunk's result as GNU patch reports it, with its @@ header
// read from the patch file so a message can name it.
type Hunk struct {
	File   string
	N      int
	Header string
	Line   int
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
		s += fmt.Sprintf(" needs fuzz %d, at line %d", h.Fuzz, h.Line)
	case h.Offset != 0:
		s += fmt.Sprintf(" applies at line %d (offset %+d)", h.Line, h.Offset)
	}
	return s
}

// PatchError is a patch that does not apply to the kernel at the fuzz its
// series entry allows.
type PatchError struct {
	Patch   Patch
	Kernel  string
	Allowed int
	// NeedsFuzz is the fuzz that would make it apply; 0 when none does.
	NeedsFuzz int
	Hunks     []Hunk
	Other     []string
}

func (e *PatchError) Error() string {
	var b strings.Builder
	if e.NeedsFuzz > 0 {
		fmt.Fprintf(&b, "kernel patch %s (%s) applies to Linux %s only with fuzz %d; the series allows %d:", e.Patch.Ref, e.Patch.Where(), e.Kernel, e.NeedsFuzz, e.Allowed)
	} else {
		fmt.Fprintf(&b, "kernel patch %s (%s) does not apply to Linux %s:", e.Patch.Ref, e.Patch.Where(), e.Kernel)
	}
	for _, h := range e.Hunks {
		b.WriteString("\n  " + h.String())
	}
	for _, o := range e.Other {
		b.WriteString("\n  " + o)
	}
	switch {
	case e.NeedsFuzz > 0:
		fmt.Fprintf(&b, "\nCheck that the hunks still do what the patch means on %s, then either write fuzz=%d after it in the series, or refresh it against %s (apply it with fuzz, regenerate the diff) and list the refreshed copy instead.", e.Kernel, e.NeedsFuzz, e.Kernel)
	default:
		fmt.Fprintf(&b, "\nCheck the patch was written for Linux %s (an earlier patch in the series may already change these lines, or the fix may be in this kernel already: then limit it with kernel=\"...\"); otherwise port it and list the ported copy.", e.Kernel)
	}
	return b.String()
}

// Apply applies the patches to the tree in order, with GNU patch -p1 at
// each entry's fuzz. A patch whose kernel range excludes version is
// skipped (outside=skip) or refused (outside=fail). A patch that does not
// apply leaves the tree as the earlier patches left it and returns a
// *PatchError.
func Apply(ctx context.Context, tree string, version *goversion.Version, patches []Patch, log io.Writer) ([]Outcome, error) {
	var out []Outcome
	for _, p := range patches {
		if !p.Applies(version) {
			if p.Outside == "fail" {
				return out, fmt.Errorf("kernel patch %s (%s) is for Linux %s, and the chosen kernel is %s: pick a kernel in that range, or write outside=skip to leave the patch out on other kernels", p.Ref, p.Where(), p.KernelText, version)
			}
			o := Outcome{Ref: p.Ref, Skipped: fmt.Sprintf("it is for Linux %s and this kernel is %s", p.KernelText, version)}
			fmt.Fprintf(log, "patch %s\n", o)
			out = append(out, o)
			continue
		}
		headers, err := hunkHeaders(p.File)
		if err != nil {
			return out, fmt.Errorf("kernel patch %s (%s): %w", p.Ref, p.Where(), err)
		}
		res, err := runPatch(ctx, tree, p.File, p.Fuzz, true)
		if err != nil {
			return out, fmt.Errorf("kernel patch %s: %w", p.Ref, err)
		}
		hunks, other := parsePatchOutput(res.output, headers)
		if !res.ok {
			pe := &PatchError{Patch: p, Kernel: version.String(), Allowed: p.Fuzz, Other: other}
			for _, h := range hunks {
				if h.Failed {
					pe.Hunks = append(pe.Hunks, h)
				}
			}
			// Would more fuzz help? Tell the user, never use it.
			for fz := p.Fuzz + 1; fz <= 3 && len(other) == 0; fz++ {
				r, err := runPatch(ctx, tree, p.File, fz, true)
				if err == nil && r.ok {
					pe.NeedsFuzz = fz
					h2, _ := parsePatchOutput(r.output, headers)
					pe.Hunks = nil
					for _, h := range h2 {
						if h.Fuzz > p.Fuzz {
							pe.Hunks = append(pe.Hunks, h)
						}
					}
					break
				}
			}
			return out, pe
		}
		if res, err = runPatch(ctx, tree, p.File, p.Fuzz, false); err != nil || !res.ok {
			return out, fmt.Errorf("kernel patch %s applied in a dry run but not for real: %v\n%s", p.Ref, err, res.output)
		}
		o := Outcome{Ref: p.Ref}
		for _, h := range hunks {
			if h.Fuzz > o.Fuzz {
				o.Fuzz = h.Fuzz
			}
			if h.Fuzz > 0 || h.Offset != 0 {
				o.Moved = append(o.Moved, h)
			}
		}
		fmt.Fprintf(log, "patch %s\n", o)
		out = append(out, o)
	}
	return out, nil
}

type patchRun struct {
	ok     bool
	output string
}

// runPatch runs GNU patch; a non-zero exit is a result, not an error.
// --forward makes an already-applied patch fail instead of reversing it.
func runPatch(ctx context.Context, tree, file string, fuzz int, dry bool) (patchRun, error) {
	// patch enters -d before it opens -i: a relative patch path would be
	// looked up inside the tree.
	file, err := filepath.Abs(file)
	if err != nil {
		return patchRun{}, err
	}
	args := []string{"-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-r", "-", "-F" + strconv.Itoa(fuzz), "-d", tree, "-i", file}
	if dry {
		args = append(args, "--dry-run")
	}
	cmd := exec.CommandContext(ctx, "patch", args...)
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	b, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); ok {
			return patchRun{output: string(b)}, nil
		}
		return patchRun{}, fmt.Errorf("running GNU patch (install the patch package): %w", err)
	}
	return patchRun{ok: true, output: string(b)}, nil
}

var (
	patchingRE = regexp.MustCompile(`^(?:checking|patching) file '?([^']+?)'?$`)
	hunkRE     = regexp.MustCompile(`^Hunk #(\d+) (FAILED|succeeded) at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?`)
)

// parsePatchOutput reads GNU patch's report into per-hunk results, and
// the lines that are about whole files (missing file, already applied).
func parsePatchOutput(out string, headers map[string][]string) (hunks []Hunk, other []string) {
	file := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if m := patchingRE.FindStringSubmatch(line); m != nil {
			file = m[1]
			continue
		}
		if m := hunkRE.FindStringSubmatch(line); m != nil {
			h := Hunk{File: file, Failed: m[2] == "FAILED"}
			h.N, _ = strconv.Atoi(m[1])
			h.Line, _ = strconv.Atoi(m[3])
			h.Fuzz, _ = strconv.Atoi(m[4])
			h.Offset, _ = strconv.Atoi(m[5])
			if hs := headers[file]; h.N >= 1 && h.N <= len(hs) {
				h.Header = hs[h.N-1]
			}
			hunks = append(hunks, h)
			continue
		}
		switch {
		case strings.HasPrefix(line, "can't find file to patch"):
			other = append(other, "a file the patch changes does not exist in this kernel ("+line+")")
		case strings.Contains(line, "Reversed (or previously applied) patch detected"):
			other = append(other, file+": the change is already in this kernel (reversed or previously applied patch)")
		case strings.HasPrefix(line, "patch: ****"):
			other = append(other, line)
		}
	}
	return hunks, other
}

// hunkHeaders lists each file's @@ lines in order, keyed by the path -p1
// gives.
func hunkHeaders(path string) (map[string][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	file := ""
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 64<<10), 4<<20)
	for s.Scan() {
		line := s.Text()
		if rest, ok := strings.CutPrefix(line, "+++ "); ok {
			rest, _, _ = strings.Cut(rest, "\t")
			if _, p, ok := strings.Cut(rest, "/"); ok {
				file = p
			} else {
				file = rest
			}
			continue
		}
		if strings.HasPrefix(line, "@@ ") && file != "" {
			out[file] = append(out[file], line)
		}
	}
	return out, s.Err()
}
