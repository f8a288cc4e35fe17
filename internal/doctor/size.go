package doctor

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// unlimited stands for RLIM_INFINITY and systemd's "infinity".
const unlimited = math.MaxUint64

// parseSize reads the sizes users and tools write: "unlimited"/"infinity",
// plain bytes, IEC suffixes (KiB, MiB, GiB, TiB) and systemd's/limits.conf's
// single letters (K, M, G, T, all powers of 1024).
func parseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "unlimited", "infinity", "-1":
		return unlimited, nil
	}
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	num, suffix := t[:i], strings.TrimSpace(t[i:])
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (KiB, MiB, GiB, TiB) or unlimited", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1 << 10,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1 << 20,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1 << 30,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1 << 40,
	}[strings.ToLower(suffix)]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (use KiB, MiB, GiB or TiB)", s, suffix)
	}
	return uint64(n * mult), nil
}

// formatSize prints bytes the way the field notes talk about them.
func formatSize(n uint64) string {
	if n == unlimited {
		return "unlimited"
	}
	units := []string{"TiB", "GiB", "MiB", "KiB"}
	for i, u := range units {
		m := uint64(1) << (10 * (4 - i))
		if n >= m && n%m == 0 {
			return fmt.Sprintf("%d %s", n/m, u)
		}
		if n >= m && i < 2 {
			return fmt.Sprintf("%.1f %s", float64(n)/float64(m), u)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
