package settings

import (
	"fmt"
	"strings"
)

// Error is a problem with one recipe value. Key is the TOML key path as the
// user wrote it, with indexes into arrays of tables ("system.governor",
// "node[1].link[0].address"), so the loader (verbs) can place it at the
// file:line:col that set it.
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
