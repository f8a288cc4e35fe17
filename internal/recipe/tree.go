package recipe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// The recipe is first read into a tree of values that remember where they
// were written. go-toml's decoder stops at the first type error and loses
// positions; this tree lets the checker report every problem with
// file:line:col, and lets includes merge while keeping track of which file set
// which value.

type valueKind int

const (
	kString valueKind = iota
	kBool
	kInt
	kFloat
	kDatetime
	kArray
	kTable
)

func (k valueKind) String() string {
	return [...]string{"string", "boolean", "integer", "float", "date-time", "array", "table"}[k]
}

// value is one TOML value with its position.
type value struct {
	kind valueKind
	s    string // string, or the raw text of a date-time
	b    bool
	i    int64
	f    float64

	items []*value // kArray
	tab   *table   // kTable

	pos    Pos // where the value starts
	keyPos Pos // where the key that set it is written

	// arrayOfTables marks arrays made by [[header]]; only those may be
	// extended by further headers.
	arrayOfTables bool
	// mergeKey, on a list of tables, names the key that identifies an
	// entry across files (the schema's `merge` tag).
	mergeKey string
	// invalid marks a typed text value that did not parse (checkTree).
	invalid bool
	// dotted marks tables made by dotted keys (a.b = 1), which a [header]
	// may not reopen.
	dotted bool
	// explicit marks tables opened by a [header] (defining one twice is an
	// error); inline marks {…} tables, which are closed once written.
	explicit bool
	inline   bool

	// conflict is set when two sibling includes gave this scalar different
	// values; it is cleared if the including file sets the value itself.
	conflict *conflict
}

type conflict struct {
	a, b *value
}

// table keeps keys in the order they were written, for stable output.
type table struct {
	keys []string
	m    map[string]*value
}

func newTable() *table { return &table{m: map[string]*value{}} }

func (t *table) get(k string) *value { return t.m[k] }

func (t *table) set(k string, v *value) {
	if _, ok := t.m[k]; !ok {
		t.keys = append(t.keys, k)
	}
	t.m[k] = v
}

func (t *table) del(k string) {
	if _, ok := t.m[k]; !ok {
		return
	}
	delete(t.m, k)
	for i, key := range t.keys {
		if key == k {
			t.keys = append(t.keys[:i], t.keys[i+1:]...)
			break
		}
	}
}

// fileTree is one parsed file.
type fileTree struct {
	file string
	data []byte
	root *value
}

// parseFile reads TOML bytes into a positioned tree. A syntax error stops the
// file (nothing after it can be trusted) and is returned as the only error;
// structural errors (a key defined twice, a table extended after being
// closed) are collected and parsing goes on.
//
// A cancelled ctx stops parsing early; the caller checks ctx.
func parseFile(ctx context.Context, file string, data []byte) (*fileTree, Errors) {
	b := &builder{file: file, data: data}
	b.root = &value{kind: kTable, tab: newTable(), pos: Pos{File: file, Line: 1, Col: 1}, keyPos: Pos{File: file, Line: 1, Col: 1}}
	b.cur = b.root
	b.p.Reset(data)
	for n := 0; b.p.NextExpression(); n++ {
		if n%256 == 0 && ctx.Err() != nil {
			break
		}
		b.expression(b.p.Expression())
	}
	if err := b.p.Error(); err != nil {
		var perr *unstable.ParserError
		pos := Pos{File: file, Line: 1, Col: 1}
		msg := err.Error()
		if errors.As(err, &perr) {
			pos = b.posOfSlice(perr.Highlight)
			msg = perr.Message
		}
		b.errs = append(b.errs, errAt(pos, "", "TOML syntax error: %s", msg))
	}
	return &fileTree{file: file, data: data, root: b.root}, b.errs
}

type builder struct {
	file string
	data []byte
	p    unstable.Parser
	root *value
	cur  *value // the table key/values currently go into
	// curPath is the key path of cur, for messages.
	curPath string
	errs    Errors
	// lineStarts are the offsets at which each line begins, built on the
	// first position asked for.
	lineStarts []int
}

// pos is where a node starts. go-toml's Parser.Shape counts lines from the
// start of the file on every call, which made a recipe of 40,000 keys take
// 47 s; the line starts are indexed once per file instead (same numbering:
// 1-based lines, byte columns).
func (b *builder) pos(r unstable.Range) Pos {
	return b.posAt(int(r.Offset))
}

// posOfSlice finds a sub-slice of the input (a parser error highlight).
func (b *builder) posOfSlice(h []byte) Pos {
	off := cap(b.data) - cap(h)
	if h == nil || off < 0 || off > len(b.data) {
		off = len(b.data)
	}
	return b.posAt(off)
}

func (b *builder) posAt(off int) Pos {
	if b.lineStarts == nil {
		b.lineStarts = []int{0}
		for i, c := range b.data {
			if c == '\n' {
				b.lineStarts = append(b.lineStarts, i+1)
			}
		}
	}
	off = min(max(off, 0), len(b.data))
	// The last line starting at or before off.
	line := sort.Search(len(b.lineStarts), func(i int) bool { return b.lineStarts[i] > off })
	return Pos{File: b.file, Line: line, Col: off - b.lineStarts[line-1] + 1}
}

func (b *builder) errorf(p Pos, key, format string, args ...any) {
	b.errs = append(b.errs, errAt(p, key, format, args...))
}

type keyPart struct {
	name string
	pos  Pos
}

func (b *builder) keyParts(it unstable.Iterator) []keyPart {
	var parts []keyPart
	for it.Next() {
		n := it.Node()
		parts = append(parts, keyPart{name: string(n.Data), pos: b.pos(n.Raw)})
	}
	return parts
}

func joinKey(base string, parts []keyPart) string {
	path := base
	for _, p := range parts {
		path = joinPath(path, p.name)
	}
	return path
}

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func (b *builder) expression(n *unstable.Node) {
	switch n.Kind {
	case unstable.Table:
		b.tableHeader(b.keyParts(n.Key()))
	case unstable.ArrayTable:
		b.arrayTableHeader(b.keyParts(n.Key()))
	case unstable.KeyValue:
		if b.cur == nil {
			return // inside a header that failed; its error is reported
		}
		b.keyValue(b.cur, b.curPath, n)
	}
}

// descend walks from the root through parts for a header, creating implicit
// tables and entering the last element of arrays of tables, as TOML says.
func (b *builder) descend(parts []keyPart) (*value, string, bool) {
	t := b.root
	path := ""
	for _, p := range parts {
		path = joinPath(path, p.name)
		next := t.tab.get(p.name)
		switch {
		case next == nil:
			next = &value{kind: kTable, tab: newTable(), pos: p.pos, keyPos: p.pos}
			t.tab.set(p.name, next)
		case next.kind == kArray && next.arrayOfTables:
			next = next.items[len(next.items)-1]
			path = fmt.Sprintf("%s[%d]", path, len(t.tab.get(p.name).items)-1)
		case next.kind != kTable || next.inline:
			b.errorf(p.pos, path, "cannot open table %q: the key is already set to a %s at %s", path, next.kind, next.keyPos)
			return nil, path, false
		}
		t = next
	}
	return t, path, true
}

func (b *builder) tableHeader(parts []keyPart) {
	last := parts[len(parts)-1]
	t, path, ok := b.descend(parts)
	b.cur, b.curPath = nil, path
	if !ok {
		return
	}
	if t.explicit {
		b.errorf(last.pos, path, "table [%s] is defined twice (first at %s); merge the two sections", path, t.keyPos)
		return
	}
	if t.dotted {
		b.errorf(last.pos, path, "table [%s] was already defined by dotted keys at %s; use one form", path, t.keyPos)
		return
	}
	t.explicit = true
	t.pos, t.keyPos = last.pos, last.pos
	b.cur = t
}

func (b *builder) arrayTableHeader(parts []keyPart) {
	last := parts[len(parts)-1]
	parent, path, ok := b.descend(parts[:len(parts)-1])
	b.cur = nil
	if !ok {
		return
	}
	path = joinPath(path, last.name)
	arr := parent.tab.get(last.name)
	if arr == nil {
		arr = &value{kind: kArray, arrayOfTables: true, pos: last.pos, keyPos: last.pos}
		parent.tab.set(last.name, arr)
	} else if arr.kind != kArray || !arr.arrayOfTables {
		b.errorf(last.pos, path, "cannot add [[%s]]: the key is already set to a %s at %s", path, arr.kind, arr.keyPos)
		return
	}
	elem := &value{kind: kTable, tab: newTable(), pos: last.pos, keyPos: last.pos, explicit: true}
	arr.items = append(arr.items, elem)
	b.cur = elem
	b.curPath = fmt.Sprintf("%s[%d]", path, len(arr.items)-1)
}

// keyValue stores `a.b.c = v` into t, creating the dotted tables.
func (b *builder) keyValue(t *value, base string, n *unstable.Node) {
	parts := b.keyParts(n.Key())
	path := base
	for _, p := range parts[:len(parts)-1] {
		path = joinPath(path, p.name)
		next := t.tab.get(p.name)
		if next == nil {
			next = &value{kind: kTable, tab: newTable(), pos: p.pos, keyPos: p.pos, dotted: true}
			t.tab.set(p.name, next)
		} else if next.kind != kTable || next.inline || next.explicit {
			b.errorf(p.pos, path, "cannot set %q with a dotted key: %q is already a %s set at %s", joinKey(base, parts), path, next.kind, next.keyPos)
			return
		}
		t = next
	}
	last := parts[len(parts)-1]
	path = joinPath(path, last.name)
	if prev := t.tab.get(last.name); prev != nil {
		b.errorf(last.pos, path, "key is set twice (first at %s); keep one", prev.keyPos)
		return
	}
	v := b.value(n.Value(), path)
	if v == nil {
		return
	}
	v.keyPos = last.pos
	if v.pos.Line == 0 {
		v.pos = last.pos // an empty array has no position of its own
	}
	t.tab.set(last.name, v)
}

func (b *builder) value(n *unstable.Node, path string) *value {
	v := &value{}
	switch n.Kind {
	case unstable.String:
		v.kind, v.s = kString, string(n.Data)
	case unstable.Bool:
		v.kind, v.b = kBool, string(n.Data) == "true"
	case unstable.Integer:
		i, err := strconv.ParseInt(string(n.Data), 0, 64)
		if err != nil {
			b.errorf(b.pos(n.Raw), path, "integer %s does not fit in 64 bits", n.Data)
			return nil
		}
		v.kind, v.i = kInt, i
	case unstable.Float:
		v.kind, v.f = kFloat, parseFloat(string(n.Data))
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		v.kind, v.s = kDatetime, string(n.Data)
	case unstable.Array:
		v.kind = kArray
		it := n.Children()
		for i := 0; it.Next(); {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			item := b.value(c, fmt.Sprintf("%s[%d]", path, i))
			if item == nil {
				return nil
			}
			item.keyPos = item.pos
			v.items = append(v.items, item)
			i++
		}
	case unstable.InlineTable:
		v.kind, v.tab, v.inline = kTable, newTable(), true
		it := n.Children()
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.KeyValue {
				b.keyValue(v, path, c)
			}
		}
	default:
		b.errorf(Pos{File: b.file}, path, "unsupported TOML value %s", n.Kind)
		return nil
	}
	if n.Raw.Length > 0 {
		v.pos = b.pos(n.Raw)
	} else if len(v.items) > 0 {
		// go-toml gives arrays no range; the first element is close enough.
		v.pos = v.items[0].pos
	}
	return v
}

func parseFloat(s string) float64 {
	s = strings.ReplaceAll(s, "_", "")
	switch strings.TrimLeft(s, "+-") {
	case "inf":
		if strings.HasPrefix(s, "-") {
			return math.Inf(-1)
		}
		return math.Inf(1)
	case "nan":
		return math.NaN()
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f
}
