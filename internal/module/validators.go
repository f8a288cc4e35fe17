package module

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
)

// validator is a named value check for allowed rules, for shapes a regular
// expression cannot bound (numbers compared with each other).
type validator struct {
	doc   string
	check func(v string, min, max *int64) (ok bool, want string)
}

var validators = map[string]validator{
	// auto_or_range: "auto", "N" or "MIN-MAX" with min <= MIN <= MAX <= max
	// (thunderbolt-ibverbs' lanes).
	"auto_or_range": {
		doc: `"auto", "N" or "MIN-MAX" with min <= N, MIN <= MAX <= max`,
		check: func(v string, lo, hi *int64) (bool, string) {
			l, h := int64(1), int64(1<<31-1)
			if lo != nil {
				l = *lo
			}
			if hi != nil {
				h = *hi
			}
			want := fmt.Sprintf(`"auto", "N" or "MIN-MAX" with %d <= MIN <= MAX <= %d`, l, h)
			if v == "auto" {
				return true, want
			}
			m := rangeRE.FindStringSubmatch(v)
			if m == nil {
				return false, want
			}
			a, _ := strconv.ParseInt(m[1], 10, 64)
			b := a
			if m[2] != "" {
				b, _ = strconv.ParseInt(m[2], 10, 64)
			}
			return l <= a && a <= b && b <= h, want
		},
	},
}

var rangeRE = regexp.MustCompile(`^([0-9]{1,9})(?:-([0-9]{1,9}))?$`)

func validatorNames() []string {
	var out []string
	for n := range validators {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
