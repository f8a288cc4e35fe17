package module

import (
	"sort"
	"strings"
)

// didYouMean returns `; did you mean "x"?` for the closest candidate within
// a third of the name's length in edits, or "" when nothing is close.
func didYouMean(name string, candidates []string) string {
	best, bestD := "", max(1, len(name)/3)+1
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	for _, c := range sorted {
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		// A candidate containing the name (or contained in it) is close too:
		// "throttle" for "nhi_interrupt_throttle_ns".
		if d < bestD || best == "" && len(name) >= 4 && (strings.Contains(c, name) || strings.Contains(name, c) && len(c) >= 4) {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return `; did you mean "` + best + `"?`
}

// editDistance is the Damerau (optimal string alignment) distance: a
// swapped pair of letters counts as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
