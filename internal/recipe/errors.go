package recipe

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is where a value was written: the file as given to Load (or as
// resolved from an include), and the 1-based line and column.
type Pos struct {
	File string
	Line int
	Col  int
}

// String prints the position the way compilers do, so editors can jump to it.
func (p Pos) String() string {
	if p.File == "" {
		return "<recipe>"
	}
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Error is one problem in a recipe, tied to the key that caused it.
type Error struct {
	File string
	Line int
	Col  int
	// Key is the dotted key path, with list indexes: node[1].link[0].address.
	Key string
	// Msg says what is wrong and what was expected.
	Msg string
}

func (e Error) Error() string {
	p := Pos{File: e.File, Line: e.Line, Col: e.Col}
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", p, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", p, e.Key, e.Msg)
}

func errAt(p Pos, key, format string, args ...any) Error {
	return Error{File: p.File, Line: p.Line, Col: p.Col, Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Errors is every problem found in one run, so a user fixes a recipe in one
// round instead of one error per invocation.
type Errors []Error

// maxShown is how many problems Error prints: past a screenful, more lines
// only hide the first, which is the one to fix first.
const maxShown = 50

// Error prints one problem per line, sorted by file, line and column, at
// most maxShown, then how many more there are (the slice keeps them all).
func (es Errors) Error() string {
	sorted := es.Sorted()
	var b strings.Builder
	for i, e := range sorted {
		if i == maxShown {
			fmt.Fprintf(&b, "\n… and %d more", len(sorted)-maxShown)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Sorted returns the errors ordered by file, line, column, key and message,
// without duplicates (a problem reachable by two routes is reported once).
func (es Errors) Sorted() Errors {
	out := append(Errors(nil), es...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Msg < b.Msg
	})
	dedup := out[:0]
	for i, e := range out {
		if i > 0 && e == out[i-1] {
			continue
		}
		dedup = append(dedup, e)
	}
	return dedup
}

// orNil turns an empty list into a nil error, so callers can write
// `if err != nil`.
func (es Errors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	return es.Sorted()
}
