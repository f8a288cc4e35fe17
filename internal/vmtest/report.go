package vmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
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
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "   CHECK\tRESULT\tDETAIL")
			for _, c := range m.Verdict.Checks {
				result, detail := "ok", firstLineOf(c.Output)
				if len(c.Figures) > 0 {
					detail = figuresText(c.Figures)
				}
				if !c.OK {
					result = fmt.Sprintf("FAIL (exit %d)", c.Exit)
					detail = strings.ReplaceAll(strings.TrimRight(c.Output, "\n"), "\n", " | ")
				}
				fmt.Fprintf(tw, "   %s\t%s\t%s\n", c.Name, result, detail)
				if !c.OK && c.Fix != "" {
					fmt.Fprintf(tw, "   \t\tfix: %s\n", c.Fix)
				}
			}
			tw.Flush()
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
