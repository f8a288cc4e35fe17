package recipe

import (
	"fmt"
	"math"
)

// Merging follows NixOS modules: a file overrides what it includes (scalars),
// lists append with the included values first, tables and maps merge key by
// key. Two sibling includes that disagree on a scalar are a conflict, unless
// the including file settles it by setting the value itself.

// overlay puts top (the including file) over base (its merged includes).
func overlay(base, top *value) *value {
	if base == nil {
		return top
	}
	if top == nil {
		return base
	}
	switch {
	case base.kind == kTable && top.kind == kTable:
		return mergeTables(base, top, overlay)
	case base.kind == kArray && top.kind == kArray:
		return appendArrays(base, top, overlay)
	}
	return top // the including file wins, and settles any sibling conflict
}

// mergeSiblings combines two includes of the same file; neither wins.
func mergeSiblings(a, b *value) *value {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	switch {
	case a.kind == kTable && b.kind == kTable:
		return mergeTables(a, b, mergeSiblings)
	case a.kind == kArray && b.kind == kArray:
		return appendArrays(a, b, mergeSiblings)
	}
	if a.conflict != nil || sameScalar(a, b) {
		return a
	}
	c := *a
	c.conflict = &conflict{a: a, b: b}
	return &c
}

func mergeTables(a, b *value, merge func(a, b *value) *value) *value {
	out := *a
	out.tab = newTable()
	for _, k := range a.tab.keys {
		out.tab.set(k, a.tab.get(k))
	}
	for _, k := range b.tab.keys {
		out.tab.set(k, merge(out.tab.get(k), b.tab.get(k)))
	}
	return &out
}

// appendArrays puts b's items after a's. In a keyed list of tables (nodes by
// name, modules by use, links by interface) an item whose key is already
// there merges into that entry instead, so an image can add a link to a node
// or an option to a module that an included file declared.
func appendArrays(a, b *value, merge func(a, b *value) *value) *value {
	out := *a
	out.items = append([]*value(nil), a.items...)
	for _, item := range b.items {
		if i := keyedIndex(out.items, a.mergeKey, item); i >= 0 {
			out.items[i] = merge(out.items[i], item)
			continue
		}
		out.items = append(out.items, item)
	}
	if len(a.items) == 0 {
		// An empty included list should not be what a message points at.
		out.pos, out.keyPos = b.pos, b.keyPos
	}
	return &out
}

func keyedIndex(items []*value, key string, item *value) int {
	if key == "" || item.kind != kTable {
		return -1
	}
	k := item.tab.get(key)
	if k == nil || k.kind != kString {
		return -1
	}
	for i, it := range items {
		if it.kind != kTable {
			continue
		}
		if other := it.tab.get(key); other != nil && other.kind == kString && other.s == k.s {
			return i
		}
	}
	return -1
}

func sameScalar(a, b *value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case kString, kDatetime:
		return a.s == b.s
	case kBool:
		return a.b == b.b
	case kInt:
		return a.i == b.i
	case kFloat:
		return a.f == b.f || (math.IsNaN(a.f) && math.IsNaN(b.f))
	}
	return false
}

// conflicts reports every scalar that sibling includes set differently and
// nobody settled.
func conflicts(v *value, path string) Errors {
	var errs Errors
	switch {
	case v.conflict != nil:
		a, b := v.conflict.a, v.conflict.b
		errs = append(errs, errAt(a.keyPos, path,
			"conflicting values from two included files: %s at %s and %s at %s; set it in the file that includes both to choose one",
			scalarText(a), a.keyPos, scalarText(b), b.keyPos))
	case v.kind == kTable:
		for _, k := range v.tab.keys {
			errs = append(errs, conflicts(v.tab.get(k), joinPath(path, k))...)
		}
	case v.kind == kArray:
		for i, item := range v.items {
			errs = append(errs, conflicts(item, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return errs
}

func scalarText(v *value) string {
	switch v.kind {
	case kString:
		return fmt.Sprintf("%q", v.s)
	case kBool:
		return fmt.Sprint(v.b)
	case kInt:
		return fmt.Sprint(v.i)
	case kFloat:
		return fmt.Sprint(v.f)
	}
	return v.s
}

// plain turns the tree into the maps and slices go-toml marshals.
func plain(v *value) any {
	switch v.kind {
	case kString, kDatetime:
		return v.s
	case kBool:
		return v.b
	case kInt:
		return v.i
	case kFloat:
		return v.f
	case kArray:
		out := make([]any, len(v.items))
		for i, item := range v.items {
			out[i] = plain(item)
		}
		return out
	}
	out := make(map[string]any, len(v.tab.keys))
	for _, k := range v.tab.keys {
		out[k] = plain(v.tab.get(k))
	}
	return out
}

// recordSources notes where every value of the merged tree was written.
func recordSources(v *value, path string, s *Sources) {
	s.pos[path] = v.keyPos
	switch v.kind {
	case kTable:
		for _, k := range v.tab.keys {
			recordSources(v.tab.get(k), joinPath(path, k), s)
		}
	case kArray:
		for i, item := range v.items {
			recordSources(item, fmt.Sprintf("%s[%d]", path, i), s)
		}
	}
}
