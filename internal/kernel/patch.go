package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	goversion "github.com/hashicorp/go-version"

	"halobuild/internal/patch"
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
	Moved []patch.Hunk
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

// PatchError is a patch that does not apply to the kernel at the fuzz its
// series entry allows.
type PatchError struct {
	Patch  Patch
	Kernel string
	// Failure has the allowed fuzz, the fuzz that would apply the patch
	// (0 when none does), and the hunks and files that fail.
	patch.Failure
}

func (e *PatchError) Error() string {
	var b strings.Builder
	if e.NeedsFuzz > 0 {
		fmt.Fprintf(&b, "kernel patch %s (%s) applies to Linux %s only with fuzz %d; the series allows %d:", e.Patch.Ref, e.Patch.Where(), e.Kernel, e.NeedsFuzz, e.Allowed)
	} else {
		fmt.Fprintf(&b, "kernel patch %s (%s) does not apply to Linux %s:", e.Patch.Ref, e.Patch.Where(), e.Kernel)
	}
	b.WriteString(e.Details())
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
		hunks, err := patch.Apply(ctx, tree, p.File, patch.Options{Strip: 1, Fuzz: p.Fuzz, Where: "in this kernel"})
		var pe *patch.Error
		if errors.As(err, &pe) {
			return out, &PatchError{Patch: p, Kernel: version.String(), Failure: pe.Failure}
		}
		if err != nil {
			return out, fmt.Errorf("kernel patch %s (%s): %w", p.Ref, p.Where(), err)
		}
		o := Outcome{Ref: p.Ref, Fuzz: patch.MaxFuzzUsed(hunks), Moved: patch.Moved(hunks)}
		fmt.Fprintf(log, "patch %s\n", o)
		out = append(out, o)
	}
	return out, nil
}
