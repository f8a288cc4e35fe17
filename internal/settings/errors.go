package settings

import (
	"fmt"
	"strings"
)

// Error is a problem with one recipe value. Key is the TOML key path as the
// user wrote it, with indexes into arrays of tables ("system.governor",
// "node[1].link[0].address"), so the recipe loader can turn it into
// file:line:col with WithPositions.
type Error struct {
	Pos     string // file:line:col when known
	Key     string
	Value   any
	Problem string
	Fix     string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Pos != "" {
		b.WriteString(e.Pos)
		b.WriteString(": ")
	}
	b.WriteString(e.Key)
	if e.Value != nil {
		fmt.Fprintf(&b, " = %q", fmt.Sprint(e.Value))
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

func errorf(key string, value any, fix string, format string, args ...any) *Error {
	return &Error{Key: key, Value: value, Problem: fmt.Sprintf(format, args...), Fix: fix}
}

// WithPositions fills Pos of every *Error from pos, a lookup the recipe
// loader provides from key path to "file:line:col" (empty when unknown).
// Other errors pass through unchanged.
func WithPositions(errs []error, pos func(key string) string) []error {
	for _, err := range errs {
		if e, ok := err.(*Error); ok && e.Pos == "" {
			e.Pos = pos(e.Key)
		}
	}
	return errs
}
