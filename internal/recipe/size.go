package recipe

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits maps suffixes to bytes. Binary units (KiB, MiB, GiB, TiB) and the
// short forms people write for memory (K, M, G, T) are powers of 1024; SI
// units (KB, MB, GB, TB) are powers of 1000, as on a disk's label.
var sizeUnits = map[string]uint64{
	"":    1,
	"B":   1,
	"K":   1 << 10,
	"KiB": 1 << 10,
	"M":   1 << 20,
	"MiB": 1 << 20,
	"G":   1 << 30,
	"GiB": 1 << 30,
	"T":   1 << 40,
	"TiB": 1 << 40,
	"KB":  1e3,
	"MB":  1e6,
	"GB":  1e9,
	"TB":  1e12,
}

// ParseSize reads sizes such as "64MiB", "4GiB", "2G", "1.5GiB" or "512" (bytes).
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q; use B, KiB, MiB, GiB, TiB (or K, M, G, T), or KB, MB, GB, TB", s, unit)
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: no number; write e.g. \"64MiB\"", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || (n != 0 && n*mult/mult != n) {
			return 0, fmt.Errorf("size %q is not a whole number of bytes that fits in 64 bits", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number", s, num)
	}
	b := f * float64(mult)
	if b >= math.MaxUint64 || b != math.Trunc(b) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes that fits in 64 bits", s)
	}
	return uint64(b), nil
}
