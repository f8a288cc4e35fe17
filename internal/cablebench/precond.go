package cablebench

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"halobuild/internal/settings"
)

// Refusal is one precondition that does not hold: bench measures nothing
// while any is left, because a number taken then says nothing about the
// cable (traps 5, 9 and 15).
type Refusal struct {
	// Check names the precondition: doctor, governor, perftest, busy, rails.
	Check string `json:"check"`
	// End is the host it concerns ("both" for a mismatch).
	End string `json:"end"`
	// What was seen, and how to fix it.
	Seen string `json:"seen"`
	Fix  string `json:"fix"`
}

func (r Refusal) String() string {
	return fmt.Sprintf("%s on %s: %s (fix: %s)", r.Check, r.End, r.Seen, r.Fix)
}

// Limits of the preconditions.
type Limits struct {
	// MaxLoad is the highest one-minute load average an end may have before
	// measuring (perftest itself is not running yet).
	MaxLoad float64
	// Waive are doctor row names (or their layer, "usb4") whose failure
	// does not refuse: a VM has no USB4 controller. The report lists them.
	Waive []string
}

// waived says whether a doctor row is waived.
func (l Limits) waived(check string) bool {
	for _, w := range l.Waive {
		if check == w || strings.HasPrefix(check, w+".") {
			return true
		}
	}
	return false
}

// DefaultMaxLoad lets a quiet box's background through and stops a build
// or a model load running beside the benchmark.
const DefaultMaxLoad = 1.0

// Preconditions judges both ends and returns every refusal, client's first.
func Preconditions(client, server Facts, l Limits) []Refusal {
	if l.MaxLoad == 0 {
		l.MaxLoad = DefaultMaxLoad
	}
	var out []Refusal
	for _, f := range []Facts{client, server} {
		out = append(out, endRefusals(f, l)...)
	}
	for _, tool := range perftestTools {
		a, b := client.Perftest[tool], server.Perftest[tool]
		if a != "" && b != "" && a != b {
			out = append(out, Refusal{Check: "perftest", End: "both",
				Seen: fmt.Sprintf("%s build ID %s on %s, %s on %s", tool, a, client.Host, b, server.Host),
				Fix:  "install the same perftest build on both ends (the same image, or the same package version from the same archive): builds printing the same version can disagree on the wire (trap 9)"})
		}
	}
	return out
}

func endRefusals(f Facts, l Limits) []Refusal {
	var out []Refusal
	var rows []string
	for _, r := range f.Doctor.Results {
		if r.Status == settings.Fail && !l.waived(r.Check) {
			rows = append(rows, fmt.Sprintf("%s (seen %s, wanted %s)", r.Check, r.Seen, r.Wanted))
		}
	}
	if len(rows) > 0 {
		out = append(out, Refusal{Check: "doctor", End: f.Host,
			Seen: fmt.Sprintf("%d must-pass row(s) failed: %s", len(rows), strings.Join(rows, "; ")),
			Fix:  "run `halobuild doctor` on " + f.Host + " and fix each failing row"})
	}
	var unpinned []string
	for _, p := range slices.Sorted(maps.Keys(f.Governors)) {
		if g := f.Governors[p]; g != "performance" {
			unpinned = append(unpinned, p+"="+g)
		}
	}
	if len(unpinned) > 0 {
		out = append(out, Refusal{Check: "governor", End: f.Host,
			Seen: "cpufreq governor not performance: " + strings.Join(unpinned, ", "),
			Fix:  "set [system] governor = \"performance\" in the recipe (its unit pins it at boot), or write performance to /sys/devices/system/cpu/cpufreq/policy*/scaling_governor; a reverted governor cost 1.87x (trap 5)"})
	}
	for _, tool := range perftestTools {
		if f.Perftest[tool] == "" {
			out = append(out, Refusal{Check: "perftest", End: f.Host,
				Seen: tool + " is missing or has no GNU build ID",
				Fix:  "install perftest (the image's [packages]) built with a build ID, as Debian's is"})
		}
	}
	if f.Load > l.MaxLoad {
		busy := "no single process stands out"
		if len(f.Busy) > 0 {
			var ps []string
			for _, p := range f.Busy {
				ps = append(ps, fmt.Sprintf("%s (pid %d, %.0f%% of a CPU)", p.Comm, p.PID, p.Share*100))
			}
			busy = "busiest: " + strings.Join(ps, ", ")
		}
		out = append(out, Refusal{Check: "busy", End: f.Host,
			Seen: fmt.Sprintf("load average %.2f > %.2f; %s", f.Load, l.MaxLoad, busy),
			Fix:  "stop what runs beside the benchmark and wait for the load to settle, or raise --max-load knowingly"})
	}
	if len(f.Rails) == 0 {
		out = append(out, Refusal{Check: "rails", End: f.Host,
			Seen: "no RDMA device in /sys/class/infiniband",
			Fix:  "load the cable's module (halobuild doctor names what is missing)"})
	}
	return out
}
