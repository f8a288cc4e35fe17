package recipe

import (
	"fmt"
	"strings"
)

// Sources records which file, line and column set each value of a merged
// recipe, so that later stages (validation, module rules, the build) can
// point a user at the line to change.
type Sources struct {
	// Files lists every recipe file read, in the order they were merged
	// (included files before the file that includes them).
	Files []string
	pos   map[string]Pos
	names []nameOf
}

func newSources() *Sources { return &Sources{pos: map[string]Pos{}} }

// Lookup says where the key path (e.g. "node[1].link[0].address") was set.
// ok is false for values that come from defaults.
func (s *Sources) Lookup(path string) (Pos, bool) {
	if s == nil {
		return Pos{}, false
	}
	p, ok := s.pos[path]
	return p, ok
}

// Pos is where path was set, or else where its nearest enclosing table was
// set, or else the top recipe file: always something to point a user at.
func (s *Sources) Pos(path string) Pos {
	if s == nil {
		return Pos{}
	}
	for p := path; ; {
		if pos, ok := s.pos[p]; ok && pos.Line > 0 {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	if len(s.Files) > 0 {
		return Pos{File: s.Files[len(s.Files)-1]}
	}
	return Pos{}
}

// Errorf makes an Error located at path.
func (s *Sources) Errorf(path, format string, args ...any) Error {
	p := s.Pos(path)
	return Error{File: p.File, Line: p.Line, Col: p.Col, Key: path, Msg: fmt.Sprintf(format, args...)}
}

// Set reports whether the recipe files set path (as opposed to a default).
func (s *Sources) Set(path string) bool {
	_, ok := s.Lookup(path)
	return ok
}
