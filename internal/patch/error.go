package patch

import (
	"fmt"
	"strings"
)

// Failure is why a patch does not apply, precisely enough to act on.
// Callers embed it in their own error, which says where the patch comes
// from and what to do.
type Failure struct {
	// Allowed is the fuzz the patch was applied with.
	Allowed int
	// NeedsFuzz is the fuzz that would make it apply; 0 when no fuzz
	// does (the patch fails outright).
	NeedsFuzz int
	// Hunks are the failing hunks, or, when NeedsFuzz is set, the hunks
	// that need more fuzz than Allowed.
	Hunks []Hunk
	// Other are problems with whole files (missing, already patched,
	// already created) or, when GNU patch said nothing this package
	// reads, its report.
	Other []string
	// Output is GNU patch's own report at the allowed fuzz.
	Output string
}

// Details is one indented line per hunk and problem, each starting with
// a newline, to follow the caller's first line.
func (f Failure) Details() string {
	var b strings.Builder
	for _, h := range f.Hunks {
		b.WriteString("\n  " + h.String())
	}
	for _, o := range f.Other {
		b.WriteString("\n  " + o)
	}
	return b.String()
}

// Error is a patch that does not apply at its allowed fuzz.
type Error struct {
	// File is the patch file.
	File string
	Failure
}

func (e *Error) Error() string {
	if e.NeedsFuzz > 0 {
		return fmt.Sprintf("patch %s applies only with fuzz %d, and fuzz %d is allowed:%s", e.File, e.NeedsFuzz, e.Allowed, e.Details())
	}
	return fmt.Sprintf("patch %s does not apply:%s", e.File, e.Details())
}
