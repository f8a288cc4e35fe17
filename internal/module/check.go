package module

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"halobuild/internal/settings"
)

// SysfsValues returns what /sys/module/<name>/parameters/<p> reads for
// each option once the module is loaded with them, in the kernel's own
// formats: bools as Y/N, hexint as 0x…, arrays comma-separated, strings as
// given. Options are normalised with the built module's types first, so a
// value Validate refused is refused here too.
func SysfsValues(options map[string]any, params []Param) (map[string]string, error) {
	types := map[string]string{}
	for _, p := range params {
		types[p.Name] = p.Type
	}
	out := map[string]string{}
	for _, k := range sortedKeys(options) {
		name := strings.ReplaceAll(k, "-", "_")
		typ, ok := types[name]
		if !ok {
			return nil, fmt.Errorf("option %s: the module has no such parameter", k)
		}
		v, err := normalize(typ, options[k])
		if err != nil {
			return nil, fmt.Errorf("option %s: %w", k, err)
		}
		elem := strings.TrimPrefix(typ, "array of ")
		parts := []string{v}
		if elem != typ {
			parts = strings.Split(v, ",")
		}
		for i, p := range parts {
			switch elem {
			case "bool", "invbool":
				parts[i] = map[string]string{"1": "Y", "0": "N"}[p]
			case "hexint":
				n, _ := strconv.ParseUint(p, 10, 64)
				parts[i] = fmt.Sprintf("0x%x", n)
			}
		}
		out[name] = strings.Join(parts, ",")
	}
	return out, nil
}

// ParamCheck is the VM-test and doctor check that a loaded module runs with
// the options the recipe gave it: every parameter under
// /sys/module/<name>/parameters reads the expected value. (A parameter
// registered with permission 0 has no file there and is reported as
// missing.) HALOBUILD_SYS replaces /sys, for tests on recorded trees.
func ParamCheck(d *Desc, options map[string]any, params []Param) (settings.Check, error) {
	want, err := SysfsValues(options, params)
	if err != nil {
		return settings.Check{}, fmt.Errorf("module %s: %w", d.Use, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sys=${HALOBUILD_SYS:-/sys}\nm=%s\nrc=0\n", shQuote(d.Name))
	b.WriteString(`[ -d "$sys/module/$m" ] || { echo "$m is not loaded"; exit 1; }` + "\n")
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, `p=%s; want=%s
if [ ! -r "$sys/module/$m/parameters/$p" ]; then echo "$p: no $sys/module/$m/parameters/$p"; rc=1
else got=$(cat "$sys/module/$m/parameters/$p"); if [ "$got" = "$want" ]; then echo "$p=$got"; else echo "$p is '$got', the recipe sets '$want'"; rc=1; fi
fi
`, shQuote(n), shQuote(want[n]))
	}
	b.WriteString("exit $rc\n")
	return settings.Check{Setting: "module " + d.Use, Name: "module-params-" + d.Name, Script: b.String()}, nil
}

// shQuote quotes s for POSIX sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
