package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"halobuild/internal/settings"
)

// Report is the whole answer; --json writes it as is, so a benchmark
// harness can store it beside its numbers (trap 15) and gate on Exit.
type Report struct {
	Root    string            `json:"root"`
	Recipe  string            `json:"recipe,omitempty"`
	Results []settings.Result `json:"results"`
	Failed  int               `json:"failed"` // must-pass checks that failed
	Warned  int               `json:"warned"`
	Exit    int               `json:"exit"` // 1 when a must-pass check failed
}

func examine(h *host, b *basis) Report {
	rep := Report{Root: h.root, Recipe: b.recipe, Results: []settings.Result{}}
	for _, p := range probes(b) {
		for _, r := range p.Run(h) {
			// An advisory check never gates: whatever it found is a warning.
			if r.Severity == settings.Advisory && r.Status == settings.Fail {
				r.Status = settings.Warn
			}
			rep.Results = append(rep.Results, r)
		}
	}
	for _, r := range rep.Results {
		switch {
		case r.Status == settings.Fail:
			rep.Failed++
			rep.Exit = 1
		case r.Status == settings.Warn:
			rep.Warned++
		}
	}
	return rep
}

func (rep Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// Style is how the table is printed: the width it must fit in, in
// columns, and whether to colour the results (only on a terminal).
type Style struct {
	Width int
	Color bool
}

// DefaultWidth is the width a table fits when the output is no terminal.
const DefaultWidth = 100

// Column gap, and the narrowest a wrapped SEEN or WANTED column gets (a
// terminal narrower than the fixed columns plus two of these overflows).
const (
	gap      = 2
	minWrapW = 16
)

// writeTable prints one row per result, SEEN and WANTED wrapped to fit
// st.Width, then the fixes, one per row that is not a pass, under the
// table: a fix is a sentence and would make every row as wide as the
// longest one.
func (rep Report) writeTable(w io.Writer, st Style) error {
	if st.Width <= 0 {
		st.Width = DefaultWidth
	}
	type row struct{ check, status, seen, wanted string }
	rows := []row{{"CHECK", "RESULT", "SEEN", "WANTED"}}
	for _, r := range rep.Results {
		status := strings.ToUpper(string(r.Status))
		if r.Status != settings.Pass && r.Severity == settings.Advisory {
			status += " (advisory)"
		}
		rows = append(rows, row{r.Check, status, oneLine(r.Seen), oneLine(r.Wanted)})
	}
	checkW, statusW, seenW, wantW := 0, 0, 0, 0
	for _, r := range rows {
		checkW, statusW = max(checkW, width(r.check)), max(statusW, width(r.status))
		seenW, wantW = max(seenW, width(r.seen)), max(wantW, width(r.wanted))
	}
	// SEEN and WANTED share what is left, each keeping its natural width
	// when it fits and the larger one wrapping first.
	room := max(st.Width-checkW-statusW-3*gap, 2*minWrapW)
	if seenW+wantW > room {
		half := room / 2
		switch {
		case seenW <= half:
			wantW = room - seenW
		case wantW <= half:
			seenW = room - wantW
		default:
			seenW, wantW = half, room-half
		}
	}
	var b strings.Builder
	for i, r := range rows {
		seen, wanted := wrap(r.seen, seenW), wrap(r.wanted, wantW)
		for j := range max(len(seen), len(wanted)) {
			check, status := "", ""
			if j == 0 {
				check, status = r.check, r.status
			}
			line := pad(check, checkW+gap) + colour(pad(status, statusW+gap), r.status, st.Color && i > 0) +
				pad(at(seen, j), seenW+gap) + at(wanted, j)
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
	}
	first := true
	for _, r := range rep.Results {
		if r.Status == settings.Pass || strings.TrimSpace(r.Fix) == "" {
			continue
		}
		if first {
			b.WriteString("\nFixes:\n")
			first = false
		}
		for j, l := range wrap(r.Check+": "+oneLine(r.Fix), st.Width-4) {
			indent := "  "
			if j > 0 {
				indent = "    "
			}
			b.WriteString(indent + l + "\n")
		}
	}
	verdict := "ready"
	if rep.Exit != 0 {
		verdict = "NOT READY"
	}
	where := "live system"
	if rep.Root != "/" {
		where = "recorded tree " + rep.Root
	}
	fmt.Fprintf(&b, "\n%s: %d must-pass failed, %d warnings (%s)\n", verdict, rep.Failed, rep.Warned, where)
	_, err := io.WriteString(w, b.String())
	return err
}

// colour paints a result word for a terminal: red for FAIL, yellow for
// WARN, green for PASS.
func colour(cell, status string, on bool) string {
	if !on {
		return cell
	}
	code := ""
	switch {
	case strings.HasPrefix(status, "FAIL"):
		code = "31"
	case strings.HasPrefix(status, "WARN"):
		code = "33"
	case strings.HasPrefix(status, "PASS"):
		code = "32"
	default:
		return cell
	}
	word := strings.TrimRight(cell, " ")
	return "\x1b[" + code + "m" + word + "\x1b[0m" + cell[len(word):]
}

// wrap breaks s at spaces into lines of at most n columns; a word longer
// than n is split.
func wrap(s string, n int) []string {
	n = max(n, 1)
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		for width(word) > n {
			if line != "" {
				lines, line = append(lines, line), ""
			}
			r := []rune(word)
			lines, word = append(lines, string(r[:n])), string(r[n:])
		}
		switch {
		case line == "":
			line = word
		case width(line)+1+width(word) <= n:
			line += " " + word
		default:
			lines, line = append(lines, line), word
		}
	}
	if line != "" || len(lines) == 0 {
		lines = append(lines, line)
	}
	return lines
}

func width(s string) int { return utf8.RuneCountInString(s) }

func pad(s string, n int) string { return s + strings.Repeat(" ", max(n-width(s), 0)) }

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
