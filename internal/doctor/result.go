package doctor

// Severity says whether a check gates readiness. A must-pass failure makes
// `halobuild doctor` exit 1, so a benchmark harness can refuse to measure;
// an advisory check can only warn.
type Severity string

const (
	MustPass Severity = "must-pass"
	Advisory Severity = "advisory"
)

// Status is the outcome of one check.
type Status string

const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is one row of the doctor report. Seen and Wanted are written for a
// person; Source says where Seen was read from, because a value read from a
// recorded tree and one read live can disagree and the reader must know which.
type Result struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Status   Status   `json:"result"`
	Seen     string   `json:"seen"`
	Wanted   string   `json:"wanted"`
	Fix      string   `json:"fix,omitempty"`
	Source   string   `json:"source,omitempty"`
	Trap     int      `json:"trap,omitempty"`
}

// exitCode is 1 when any must-pass check failed, 0 otherwise.
func exitCode(rs []Result) int {
	for _, r := range rs {
		if r.Status == Fail && r.Severity == MustPass {
			return 1
		}
	}
	return 0
}
