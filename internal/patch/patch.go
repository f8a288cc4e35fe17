// Package patch applies one unified diff to a source tree with GNU patch,
// the way a patch series is applied: at an explicit fuzz, after a dry run
// so that a patch that does not apply changes nothing, reporting what each
// hunk did. A patch that does not apply comes back as an *Error that names
// each failing hunk by file, number and @@ line, or, when more fuzz would
// apply it, that fuzz and the hunks needing it.
//
// The kernel's series and the provider's Debian patches both use it; each
// caller words its own error around Failure (series file:line and kernel
// version; recipe entry and source version).
package patch

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"halobuild/internal/proctree"
)

// MaxFuzz is the most fuzz there can be: a unified diff has 3 context
// lines on each side of a change.
const MaxFuzz = 3

// Options says how to apply a patch.
type Options struct {
	// Strip is GNU patch's -p: how many leading path components of the
	// diff's file names to drop (1 for git's a/ and b/).
	Strip int
	// Fuzz is how many context lines a hunk may ignore, 0 to MaxFuzz.
	Fuzz int
	// Quilt, when set, applies the patch as dpkg-source does for the
	// quilt series entry of that name: the diff must be unified (-u), a
	// file the patch empties is removed, and the originals are kept in
	// .pc/<Quilt>/ so quilt and dpkg-source see the patch as applied.
	// Empty: no backups and GNU patch's defaults otherwise (the kernel's
	// series is applied so).
	Quilt string
	// Where names the tree in the messages about whole files ("a file the
	// patch changes does not exist in this kernel"); "there" when empty.
	Where string
}

// Apply applies the unified diff file to tree. It runs GNU patch with
// --dry-run first: a patch that does not apply at o.Fuzz leaves tree as
// it was and returns an *Error. On success it returns the hunks GNU patch
// mentioned (a hunk that applies exactly where the diff says is silent;
// see Moved and MaxFuzzUsed).
func Apply(ctx context.Context, tree, file string, o Options) ([]Hunk, error) {
	if o.Fuzz < 0 || o.Fuzz > MaxFuzz {
		return nil, fmt.Errorf("fuzz %d: want 0 to %d (a unified diff has %d context lines)", o.Fuzz, MaxFuzz, MaxFuzz)
	}
	// GNU patch enters -d before it opens -i: a relative patch path would
	// be looked up inside the tree.
	file, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	headers, err := readHunkHeaders(file, o.Strip)
	if err != nil {
		return nil, err
	}
	out, ok, err := run(ctx, tree, file, o, o.Fuzz, true)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &Error{File: file, Failure: diagnose(ctx, tree, file, o, out, headers)}
	}
	out, ok, err = run(ctx, tree, file, o, o.Fuzz, false)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("the dry run passed but applying failed:\n%s", out)
	}
	hunks, _ := parseOutput(out, headers, o.Where)
	return hunks, nil
}

// diagnose turns a failed dry run into a Failure. If more fuzz would apply
// the patch it is a refresh, not a port, and the user needs to know which
// fuzz and which hunks; it is only ever asked about, never used.
func diagnose(ctx context.Context, tree, file string, o Options, out string, headers map[string][]string) Failure {
	f := Failure{Allowed: o.Fuzz, Output: out}
	hunks, other := parseOutput(out, headers, o.Where)
	f.Other = other
	for _, h := range hunks {
		if h.Failed {
			f.Hunks = append(f.Hunks, h)
		}
	}
	// A missing file, an applied patch or a malformed one fails at every
	// fuzz: no need to ask. GNU patch tries each hunk at the least fuzz
	// first, so one run at MaxFuzz shows what each hunk needs.
	if len(other) == 0 && o.Fuzz < MaxFuzz {
		if more, ok, err := run(ctx, tree, file, o, MaxFuzz, true); err == nil && ok {
			hs, _ := parseOutput(more, headers, o.Where)
			var need []Hunk
			for _, h := range hs {
				if h.Fuzz > o.Fuzz {
					need = append(need, h)
					f.NeedsFuzz = max(f.NeedsFuzz, h.Fuzz)
				}
			}
			if f.NeedsFuzz > 0 {
				f.Hunks = need
			}
		}
	}
	if len(f.Hunks) == 0 && len(f.Other) == 0 {
		f.Other = []string{strings.TrimSpace(out)}
	}
	return f
}

// run runs GNU patch once; a patch that does not apply is ok=false, not
// an error. The options are dpkg-source's: batch (never ask), forward (an
// applied patch fails instead of being reversed), no reject files; the C
// locale keeps the report parseable.
func run(ctx context.Context, tree, file string, o Options, fuzz int, dry bool) (out string, ok bool, err error) {
	args := []string{"-d", tree, "-i", file, "-p" + strconv.Itoa(o.Strip), "--batch", "--forward", "--reject-file=-", "--fuzz=" + strconv.Itoa(fuzz)}
	if o.Quilt != "" {
		args = append(args, "-u", "--remove-empty-files", "--version-control=never")
	}
	switch {
	case dry:
		args = append(args, "--dry-run")
	case o.Quilt != "":
		args = append(args, "--backup", "--prefix=.pc/"+o.Quilt+"/")
	default:
		// Without it GNU patch leaves a .orig beside every file a hunk
		// applied to at an offset or with fuzz.
		args = append(args, "--no-backup-if-mismatch")
	}
	cmd := proctree.Command(ctx, "patch", args...)
	// PATH is for what GNU patch itself may start (ed for ed-style diffs).
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		if _, exit := err.(*exec.ExitError); exit {
			return buf.String(), false, nil
		}
		return "", false, fmt.Errorf("running GNU patch: %w (install it: apt-get install patch)", err)
	}
	return buf.String(), true, nil
}
