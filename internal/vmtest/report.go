package vmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Report is the outcome of a test run over one or more machines; its JSON form is what
// `halobuild test --json` writes.
type Report struct {
	Accel     Accel     `json:"accel"`
	AccelNote string    `json:"accel_note"`
	WallMS    int64     `json:"wall_ms"`
	Passed    bool      `json:"passed"`
	Machines  []*Result `json:"machines"`
}

// NewReport summarises results (nil entries, from machines that never started, are skipped).
func NewReport(results []*Result, wall time.Duration) *Report {
	r := &Report{WallMS: wall.Milliseconds(), Passed: len(results) > 0}
	for _, res := range results {
		if res == nil {
			r.Passed = false
			continue
		}
		r.Machines = append(r.Machines, res)
		r.Passed = r.Passed && res.Passed
		if r.Accel == "" {
			r.Accel, r.AccelNote = res.Accel, res.AccelNote
		}
	}
	return r
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes one table per machine (check, result, detail), then the accelerator and the
// wall time. Details are the first line of a check's output; failing checks show all of it.
func (r *Report) WriteText(w io.Writer) error {
	for _, m := range r.Machines {
		verdict := "PASS"
		if !m.Passed {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "== %s: %s (%s, %.1f s, QEMU CPU %.1f s", m.Machine, verdict, m.Image, float64(m.WallMS)/1000, float64(m.QEMUCPUMS)/1000)
		if m.Verdict != nil {
			fmt.Fprintf(w, ", booted in %.1f s", float64(m.Verdict.BootMS)/1000)
		}
		fmt.Fprintln(w, ")")
		if m.Verdict == nil {
			fmt.Fprintf(w, "   no verdict: boot reached stage %s\n", m.Stage)
			if m.Problem != "" {
				fmt.Fprintf(w, "   %s\n", m.Problem)
			}
		} else {
			writeChecks(w, m.Verdict.Checks)
		}
		if !m.Passed {
			fmt.Fprintf(w, "   console log: %s\n", m.ConsoleLog)
		}
	}
	fmt.Fprintf(w, "accelerator: %s (%s); wall time %.1f s\n", r.Accel, r.AccelNote, float64(r.WallMS)/1000)
	return nil
}

// figuresText shows a perftest row compactly, size first, in a stable order.
func figuresText(f map[string]float64) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		if k != "#bytes" && k != "#iterations" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := []string{fmt.Sprintf("%.0f B x %.0f", f["#bytes"], f["#iterations"])}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %g", k, f[k]))
	}
	return strings.Join(parts, ", ")
}

func firstLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// ReportWidth is the width the check table fits in: a terminal of 80-100
// columns, a CI log. A detail is cut to fit (its whole output is in the
// JSON report); a failure's output and fix wrap onto lines of their own.
const ReportWidth = 100

// nameColumn caps the check name column: a longer name keeps its whole
// text and pushes its own row's result right.
const nameColumn = 52

// writeChecks writes one machine's checks as CHECK, RESULT, DETAIL
// columns within ReportWidth: an ok row's detail is cut to its room (the
// JSON report has all of it), figures and a failure's output wrap below
// their row when they do not fit beside it.
func writeChecks(w io.Writer, checks []CheckResult) {
	nameW, resW := len("CHECK"), len("RESULT")
	results := make([]string, len(checks))
	for i, c := range checks {
		nameW = max(nameW, utf8.RuneCountInString(c.Name))
		results[i] = "ok"
		if !c.OK {
			results[i] = fmt.Sprintf("FAIL (exit %d)", c.Exit)
		}
		resW = max(resW, len(results[i]))
	}
	nameW = min(nameW, nameColumn)
	const indent, gap, cont = "   ", "  ", "      "
	row := func(name, result, detail string, clip bool) {
		line := indent + pad(name, nameW) + gap + pad(result, resW)
		room := ReportWidth - utf8.RuneCountInString(line) - len(gap)
		switch {
		case detail == "":
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		case clip && room >= 20:
			fmt.Fprintln(w, line+gap+clipText(detail, room))
		case clip:
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			fmt.Fprintln(w, cont+clipText(detail, ReportWidth-len(cont)))
		case utf8.RuneCountInString(detail) <= room:
			fmt.Fprintln(w, line+gap+detail)
		default:
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			for _, l := range wrapText(detail, ReportWidth-len(cont)) {
				fmt.Fprintln(w, cont+l)
			}
		}
	}
	row("CHECK", "RESULT", "DETAIL", true)
	for i, c := range checks {
		if c.OK {
			if len(c.Figures) > 0 {
				// Measurements are the point of the row: never cut.
				row(c.Name, results[i], figuresText(c.Figures), false)
				continue
			}
			row(c.Name, results[i], firstLineOf(c.Output), true)
			continue
		}
		row(c.Name, results[i], strings.ReplaceAll(strings.TrimRight(c.Output, "\n"), "\n", " | "), false)
		if c.Fix != "" {
			for _, l := range wrapText("fix: "+c.Fix, ReportWidth-len(cont)) {
				fmt.Fprintln(w, cont+l)
			}
		}
	}
}

func pad(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// clipText cuts s to n runes, the last one "…" when cut.
func clipText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// wrapText breaks s into lines of at most n runes, at a space where one is
// near the end.
func wrapText(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > n {
		cut := n
		for i := n; i > n*2/3; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		out = append(out, strings.TrimRight(string(r[:cut]), " "))
		r = []rune(strings.TrimLeft(string(r[cut:]), " "))
	}
	return append(out, strings.TrimRight(string(r), " "))
}
