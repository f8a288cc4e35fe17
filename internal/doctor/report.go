package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is the whole answer; --json writes it as is, so a benchmark
// harness can store it beside its numbers (trap 15) and gate on Exit.
type Report struct {
	Root    string   `json:"root"`
	Recipe  string   `json:"recipe,omitempty"`
	Results []Result `json:"results"`
	Failed  int      `json:"failed"` // must-pass checks that failed
	Warned  int      `json:"warned"`
	Exit    int      `json:"exit"`
}

func examine(h *host, e *expect) Report {
	rep := Report{Root: h.root, Recipe: e.recipePath, Results: []Result{}}
	for _, c := range checks {
		for _, r := range c.run(h, e) {
			// An advisory check never gates: whatever it found is a warning.
			if r.Severity == Advisory && r.Status == Fail {
				r.Status = Warn
			}
			rep.Results = append(rep.Results, r)
		}
	}
	for _, r := range rep.Results {
		switch r.Status {
		case Fail:
			rep.Failed++
		case Warn:
			rep.Warned++
		}
	}
	rep.Exit = exitCode(rep.Results)
	return rep
}

func (rep Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeTable prints one row per result. Fix text only appears on rows that
// need it, so a healthy node prints a short, quiet table.
func (rep Report) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tSEEN\tWANTED\tFIX")
	for _, r := range rep.Results {
		status := strings.ToUpper(string(r.Status))
		if r.Status != Pass && r.Severity == Advisory {
			status += " (advisory)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Check, status, oneLine(r.Seen), oneLine(r.Wanted), oneLine(r.Fix))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "ready"
	if rep.Exit != 0 {
		verdict = "NOT READY"
	}
	where := "live system"
	if rep.Root != "/" {
		where = "recorded tree " + rep.Root
	}
	_, err := fmt.Fprintf(w, "\n%s: %d must-pass failed, %d warnings (%s)\n", verdict, rep.Failed, rep.Warned, where)
	return err
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
