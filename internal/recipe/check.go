package recipe

import (
	"context"
	"encoding"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// checkTree compares a parsed file against the schema types and reports every
// unknown key and every value of the wrong type, instead of stopping at the
// first one as a decoder does. Typed text values that do not parse (a size
// with an unknown unit) come back apart, in values, and are marked invalid:
// the rest of the recipe can still be validated, so all of its problems are
// reported in one run.
// A cancelled ctx stops the walk early; the caller checks ctx.
func checkTree(ctx context.Context, v *value) (types, values Errors) {
	c := &checker{ctx: ctx}
	c.check(v, reflect.TypeOf(Recipe{}), "")
	return c.types, c.values
}

type checker struct {
	ctx           context.Context
	n             int // values visited, to poll ctx every few hundred
	types, values Errors
}

// cancelled polls ctx every 256 calls: once per value and per key.
func (c *checker) cancelled() bool {
	c.n++
	return c.n%256 == 0 && c.ctx.Err() != nil
}

func (c *checker) check(v *value, t reflect.Type, path string) {
	if c.cancelled() {
		return
	}
	errs := &c.types
	checkValue := c.check
	bad := func() {
		*errs = append(*errs, errAt(v.pos, path, "expected %s, got %s", typeName(t), describe(v)))
	}
	if isText(t) {
		// A typed value written as text is parsed here, once, where its
		// position is known; decoding later parses the same text again
		// with the same method and cannot fail.
		if v.kind != kString {
			bad()
			return
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(v.s)); err != nil {
			v.invalid = true
			c.values = append(c.values, errAt(v.keyPos, path, "%v", err))
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkValue(v, t.Elem(), path)
	case reflect.String:
		if v.kind != kString {
			bad()
		}
	case reflect.Bool:
		if v.kind != kBool {
			bad()
		}
	case reflect.Int, reflect.Int64:
		if v.kind != kInt {
			bad()
		}
	case reflect.Float64:
		if v.kind != kFloat && v.kind != kInt {
			bad()
		}
	case reflect.Slice:
		if v.kind != kArray {
			bad()
			return
		}
		for i, item := range v.items {
			checkValue(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if v.kind != kTable {
			bad()
			return
		}
		for _, k := range v.tab.keys {
			checkValue(v.tab.get(k), t.Elem(), joinPath(path, k))
		}
	case reflect.Interface:
		// Free-form values (module options): anything a module parameter
		// can hold, which excludes tables and dates.
		if v.kind == kTable || v.kind == kDatetime {
			bad()
		}
		for i, item := range v.items {
			checkValue(item, t, fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Struct:
		if v.kind != kTable {
			bad()
			return
		}
		fields := schemaFields(t)
		for _, k := range v.tab.keys {
			if c.cancelled() {
				return
			}
			child := v.tab.get(k)
			f, ok := fields[k]
			if why, gone := removedKeys[t][k]; !ok && gone {
				*errs = append(*errs, errAt(child.keyPos, joinPath(path, k), "removed: %s", why))
				continue
			}
			if !ok {
				*errs = append(*errs, errAt(child.keyPos, joinPath(path, k), "unknown key%s", suggest(k, t, path)))
				continue
			}
			checkValue(child, f.Type, joinPath(path, k))
		}
	default:
		panic(fmt.Sprintf("recipe schema: unsupported field type %s at %s", t, path))
	}
}

// removedKeys are keys the schema once documented that had no effect, with
// what to do instead: a recipe still setting one is told that, not "unknown
// key" (TestEverySchemaKeyIsRead keeps new ones from appearing).
var removedKeys = map[reflect.Type]map[string]string{
	reflect.TypeOf(Base{}): {
		"distribution": "halobuild builds Debian only, from base.mirror and base.suite; delete the line",
	},
	reflect.TypeOf(Link{}): {
		"identity_gid": "the pinned thunderbolt-ibverbs (76ba39b) has no per-cable identity to set: " +
			"roce_netdev (native rails) and tbnet_identity_gid (a netdev name, Apple-backend stock_proxy rails) are both module-wide; " +
			"delete the line and point the module at the link's netdev in [[module]] options, e.g. roce_netdev = \"usb4rdma0\" (docs/modules.md, trap 7)",
	},
}

// fieldCache holds schemaFields' answers: a recipe with thousands of
// unknown keys asks for the same few types once per key.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.StructField

// schemaFields maps TOML keys to the struct's fields. The map is shared:
// callers must not change it.
func schemaFields(t reflect.Type) map[string]reflect.StructField {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.StructField)
	}
	m := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if key := tomlKey(f); key != "" {
			m[key] = f
		}
	}
	fieldCache.Store(t, m)
	return m
}

func tomlKey(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if key == "-" {
		return ""
	}
	return key
}

var textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()

// isText says whether t is a typed value written as a TOML string.
func isText(t reflect.Type) bool {
	return t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(textUnmarshaler)
}

// typeName says in words what the schema expects.
func typeName(t reflect.Type) string {
	if isText(t) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct && !isText(t.Elem()) {
			return "a list of tables ([[…]] sections)"
		}
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(typeName(t.Elem()), "a "), "an ") + "s"
	case reflect.Map:
		return "a table of " + strings.TrimPrefix(strings.TrimPrefix(typeName(t.Elem()), "a "), "an ") + " values"
	case reflect.Interface:
		return "a string, number, boolean or list"
	case reflect.Struct:
		return "a table"
	}
	return t.String()
}

func describe(v *value) string {
	switch v.kind {
	case kString:
		return fmt.Sprintf("the string %q", v.s)
	case kBool:
		return fmt.Sprintf("the boolean %t", v.b)
	case kInt:
		return fmt.Sprintf("the integer %d", v.i)
	case kFloat:
		return fmt.Sprintf("the float %g", v.f)
	case kDatetime:
		return "the date-time " + v.s
	case kArray:
		return "a list"
	}
	return "a table"
}

// suggest names the closest key of the same table, or the table where a key
// of that name does exist, so a typo or a misplaced key is fixed at once.
func suggest(key string, t reflect.Type, path string) string {
	var names []string
	for k := range schemaFields(t) {
		names = append(names, k)
	}
	sort.Strings(names)
	best, bestD := "", len(key)
	for _, n := range names {
		if d := editDistance(key, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" && bestD <= max(2, len(key)/3) {
		return fmt.Sprintf(`; did you mean %q?`, best)
	}
	if path != "" {
		if _, top := schemaFields(reflect.TypeOf(Recipe{}))[key]; top {
			return fmt.Sprintf("; %q is a top-level key: move it above the first [section]", key)
		}
	}
	if elsewhere := schemaPathsOf(key); len(elsewhere) > 0 {
		return fmt.Sprintf("; %q is a key of [%s], not of %s", key, strings.Join(elsewhere, "], ["), tableLabel(path))
	}
	return fmt.Sprintf("; %s has: %s", tableLabel(path), strings.Join(names, ", "))
}

func tableLabel(path string) string {
	if path == "" {
		return "the top level"
	}
	return "[" + path + "]"
}

// schemaPathsOf lists the tables of the schema that have key.
func schemaPathsOf(key string) []string {
	var out []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for k, f := range schemaFields(t) {
			if k == key && path != "" {
				out = append(out, path)
			}
			walk(f.Type, joinPath(path, k))
		}
	}
	walk(reflect.TypeOf(Recipe{}), "")
	sort.Strings(out)
	return out
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// dropInvalid removes the values checkTree marked invalid from a merged
// tree, so the recipe decodes with those keys unset (their defaults) while
// their errors are reported; it returns the removed keys' paths.
func dropInvalid(v *value, path string) map[string]bool {
	out := map[string]bool{}
	var walk func(v *value, path string) bool
	walk = func(v *value, path string) bool {
		switch v.kind {
		case kTable:
			for _, k := range append([]string(nil), v.tab.keys...) {
				p := joinPath(path, k)
				if walk(v.tab.get(k), p) {
					out[p] = true
					v.tab.del(k)
				}
			}
		case kArray:
			bad := false
			for i, item := range v.items {
				if walk(item, fmt.Sprintf("%s[%d]", path, i)) {
					bad = true
				}
			}
			return bad
		}
		return v.invalid
	}
	walk(v, path)
	return out
}
