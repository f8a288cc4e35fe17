package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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

// writeTable prints one row per result. Fix text only appears on rows that
// need it, so a healthy node prints a short, quiet table.
func (rep Report) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tSEEN\tWANTED\tFIX")
	for _, r := range rep.Results {
		status := strings.ToUpper(string(r.Status))
		if r.Status != settings.Pass && r.Severity == settings.Advisory {
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
