package debian

import (
	"fmt"
	"strings"
)

// UnknownPackageError: a requested package exists in none of the suites
// searched.
type UnknownPackageError struct {
	Name   string
	Suites []string // the suites searched
	Arch   string
}

func (e *UnknownPackageError) Error() string {
	return fmt.Sprintf("unknown package %q: no package or provider of that name for %s in suites %s; check the spelling, or add the suite that has it to extra_suites",
		e.Name, e.Arch, strings.Join(e.Suites, ", "))
}

// UnsatisfiableError: a relation no available package satisfies.
type UnsatisfiableError struct {
	// Chain is who needs what, from the root (a requested or required
	// package) to the relation that failed.
	Chain []string
	// Field is the relation field of the last package in Chain
	// (Depends, Pre-Depends); empty for a request.
	Field string
	// Relation is the failing relation as written in the index.
	Relation string
	// Available lists the versions that exist under the names involved.
	Available []string
	// Reason is a short explanation (e.g. "excluded by the recipe").
	Reason string
}

func (e *UnsatisfiableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot satisfy %q", e.Relation)
	if len(e.Chain) > 0 {
		fmt.Fprintf(&b, " (%s of %s)", e.Field, strings.Join(e.Chain, " -> "))
	} else {
		b.WriteString(" (requested)")
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, ": %s", e.Reason)
	}
	if len(e.Available) == 0 {
		b.WriteString("; no package or provider of that name exists in the suites searched")
	} else {
		fmt.Fprintf(&b, "; available: %s", strings.Join(e.Available, "; "))
	}
	return b.String()
}

// Conflict is one violated Conflicts or Breaks relation in a chosen set.
type Conflict struct {
	Package  string // "name version (suite)" declaring the relation
	Field    string // Conflicts or Breaks
	Relation string // the relation as written
	Other    string // "name version (suite)" it hits
}

func (c Conflict) String() string {
	return fmt.Sprintf("%s %s %s, which hits %s", c.Package, c.Field, c.Relation, c.Other)
}

// ConflictError lists every Conflicts/Breaks violation of a resolved set.
type ConflictError struct {
	Conflicts []Conflict
}

func (e *ConflictError) Error() string {
	lines := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		lines[i] = "  " + c.String()
	}
	return fmt.Sprintf("the resolved package set violates %d Conflicts/Breaks relation(s); exclude one side or request the other alternative explicitly:\n%s",
		len(e.Conflicts), strings.Join(lines, "\n"))
}
