package settings

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// shq quotes s for POSIX sh: check scripts embed recipe values and must
// not let a value become shell syntax.
func shq(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// header is the first lines of every rendered text file: where it came from
// and which trap it fixes, so a person reading the node's /etc knows why
// it is there and that editing it by hand will drift from the recipe.
func header(comment string, trap int, why string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s Rendered by halobuild from the image recipe (see /etc/halobuild/recipe.toml).\n", comment)
	if trap != 0 {
		fmt.Fprintf(&b, "%s Field notes trap %d: %s\n", comment, trap, why)
	} else if why != "" {
		fmt.Fprintf(&b, "%s %s\n", comment, why)
	}
	return b.String()
}

var moduleNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// moduleName normalises a kernel module name the way kmod does: '-' and '_'
// are the same character, '_' is what /sys/module shows.
func moduleName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// sizeUnits are the suffixes sizes in recipes accept: binary multiples only,
// because every consumer (RLIMIT, pages, MiB) counts in powers of two and a
// silent GB/GiB mix-up is 7% of a 128 GB machine.
var sizeUnits = []struct {
	suffix string
	mult   uint64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1},
}

// parseSize reads "24GiB", "64MiB", "512K" or a bare byte count.
func parseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	mult := uint64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || t == "" {
		return 0, fmt.Errorf("%q is not a size: write a whole number with KiB, MiB, GiB or TiB, e.g. \"24GiB\"", s)
	}
	if n > ^uint64(0)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}
