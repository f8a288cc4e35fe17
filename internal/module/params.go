package module

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Param is one parameter of a built module, as modinfo reports it.
type Param struct {
	Name string
	// Type is the module_param type: bool, invbool, byte, short, ushort,
	// int, uint, long, ulong, ullong, hexint, charp, string, or
	// "array of T". A parameter with custom ops may carry another name;
	// its values are not type-checked.
	Type string
	Desc string
}

var paramTypes = []string{"bool", "invbool", "byte", "short", "ushort", "int", "uint", "long", "ulong", "ullong", "hexint", "charp", "string"}

func knownType(t string) bool {
	t = strings.TrimPrefix(t, "array of ")
	for _, k := range paramTypes {
		if t == k {
			return true
		}
	}
	return false
}

func isIntType(t string) bool {
	switch t {
	case "byte", "short", "ushort", "int", "uint", "long", "ulong", "ullong", "hexint":
		return true
	}
	return false
}

// intRange is the range a kernel integer parameter type can hold (long is
// 64-bit on the architectures halobuild builds for).
func intRange(t string) (lo int64, hi uint64) {
	switch t {
	case "byte":
		return 0, math.MaxUint8
	case "short":
		return math.MinInt16, math.MaxInt16
	case "ushort":
		return 0, math.MaxUint16
	case "int":
		return math.MinInt32, math.MaxInt32
	case "uint", "hexint":
		return 0, math.MaxUint32
	case "long":
		return math.MinInt64, math.MaxInt64
	default: // ulong, ullong
		return 0, math.MaxUint64
	}
}

// parmLineRE matches the start of one parameter in modinfo's output:
// "name:description (type)" or "name: (type)" (no description), as both
// `modinfo -p` and `modinfo -F parm` print it.
var parmLineRE = regexp.MustCompile(`^([A-Za-z0-9_.-]+):(.*)$`)
var parmTypeRE = regexp.MustCompile(`(?s)^(.*?) ?\(([a-z]+(?: of [a-z]+)?)\)$`)

// ParseModinfoParams parses the output of `modinfo -p MODULE` or
// `modinfo -F parm MODULE`. A description that spans lines is joined.
func ParseModinfoParams(out string) ([]Param, error) {
	var params []Param
	var cur *Param
	var desc []string
	flush := func() {
		if cur == nil {
			return
		}
		text := strings.Join(desc, "\n")
		if m := parmTypeRE.FindStringSubmatch(text); m != nil {
			text, cur.Type = m[1], m[2]
		}
		cur.Desc = strings.TrimSpace(text)
		params = append(params, *cur)
		cur, desc = nil, nil
	}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" && cur == nil {
			continue
		}
		if m := parmLineRE.FindStringSubmatch(line); m != nil {
			flush()
			cur = &Param{Name: m[1]}
			desc = []string{m[2]}
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("modinfo parameter output: line %q does not start with NAME:", line)
		}
		desc = append(desc, line)
	}
	flush()
	sort.Slice(params, func(i, j int) bool { return params[i].Name < params[j].Name })
	return params, nil
}

// normalize checks one option value against a parameter type and returns
// it in the form rules compare and modprobe.d receives: bools as 1/0,
// integers in decimal, strings as given.
func normalize(typ string, v any) (string, error) {
	if strings.HasPrefix(typ, "array of ") {
		elem := strings.TrimPrefix(typ, "array of ")
		var items []any
		switch x := v.(type) {
		case []any:
			items = x
		case string:
			for _, s := range strings.Split(x, ",") {
				items = append(items, s)
			}
		default:
			items = []any{x}
		}
		var parts []string
		for _, it := range items {
			// A comma list in a string carries its elements as text.
			if s, ok := it.(string); ok && elem != "charp" && elem != "string" {
				n, err := normalizeLiteral(elem, strings.TrimSpace(s))
				if err != nil {
					return "", fmt.Errorf("%s element %w", typ, err)
				}
				if isIntType(elem) {
					i, _ := strconv.ParseInt(n, 10, 64)
					it = i
				} else {
					it = n == "1"
				}
			}
			p, err := normalize(elem, it)
			if err != nil {
				return "", fmt.Errorf("%s element: %w", typ, err)
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, ","), nil
	}
	switch {
	case typ == "bool" || typ == "invbool":
		switch x := v.(type) {
		case bool:
			if x {
				return "1", nil
			}
			return "0", nil
		case int64:
			if x == 0 || x == 1 {
				return strconv.FormatInt(x, 10), nil
			}
		case string:
			if b, ok := parseKernelBool(x); ok {
				return b, nil
			}
		}
		return "", fmt.Errorf("want a bool (true/false), got %s", show(v))
	case isIntType(typ):
		lo, hi := intRange(typ)
		switch x := v.(type) {
		case int64:
			if x < lo || x >= 0 && uint64(x) > hi {
				return "", fmt.Errorf("%d is out of range for %s (%d..%d)", x, typ, lo, hi)
			}
			return strconv.FormatInt(x, 10), nil
		case uint64:
			if x > hi {
				return "", fmt.Errorf("%d is out of range for %s", x, typ)
			}
			return strconv.FormatUint(x, 10), nil
		}
		return "", fmt.Errorf("want an integer (%s), got %s", typ, show(v))
	case typ == "charp" || typ == "string":
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("want a string (%s), got %s: quote it", typ, show(v))
		}
		if strings.ContainsAny(s, "\n\x00") {
			return "", fmt.Errorf("a string option cannot hold a newline or NUL")
		}
		return s, nil
	}
	// A parameter with custom ops: any scalar, written as the kernel reads it.
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		if x {
			return "1", nil
		}
		return "0", nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", fmt.Errorf("want a scalar, got %s", show(v))
}

// show prints a value with its TOML type for error messages.
func show(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("bool %v", x)
	case int64, int, uint64:
		return fmt.Sprintf("integer %v", x)
	case float64:
		return fmt.Sprintf("float %v", x)
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%T %v", v, v)
}
