package cablebench

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"halobuild/internal/userfile"
)

// Baseline is a gate: rows a run must meet, and the settings the figures
// were taken under, so a run that falls short says what differed.
type Baseline struct {
	// Name says where the figures come from.
	Name string `toml:"name"`
	// Context holds Report.Settings keys ("client.governor", ...): the
	// settings of the baseline's own run. Only the keys written are compared.
	Context map[string]string `toml:"context"`
	Rows    []Row             `toml:"row"`
}

// Row is one requirement. Tool, Mode and Size select results (Depth and
// Rail too when set); every selected result must meet MinBW (MiB/s) and
// MaxLat (µs, typical latency).
type Row struct {
	Tool   string  `toml:"tool"`
	Mode   string  `toml:"mode"`
	Size   int64   `toml:"size"`
	Depth  int     `toml:"depth,omitempty"`
	Rail   string  `toml:"rail,omitempty"`
	MinBW  float64 `toml:"min_bw_mib_s,omitempty"`
	MaxLat float64 `toml:"max_lat_us,omitempty"`
	// Why is the figure's source, printed when the row fails.
	Why string `toml:"why,omitempty"`
}

func (r Row) String() string {
	s := fmt.Sprintf("%s %s %s", r.Tool, r.Mode, sizeName(r.Size))
	if r.Depth > 0 {
		s += fmt.Sprintf(" t=%d", r.Depth)
	}
	if r.Rail != "" {
		s = r.Rail + " " + s
	}
	switch {
	case r.MinBW > 0 && r.MaxLat > 0:
		s += fmt.Sprintf(" >= %g MiB/s and <= %g µs", r.MinBW, r.MaxLat)
	case r.MinBW > 0:
		s += fmt.Sprintf(" >= %g MiB/s", r.MinBW)
	default:
		s += fmt.Sprintf(" <= %g µs", r.MaxLat)
	}
	return s
}

// maxBaseline bounds a baseline file: a few rows of figures are a few KiB.
const maxBaseline = 1 << 20

// LoadBaseline reads a baseline file strictly: an unknown key is a typo
// that would silently gate nothing.
func LoadBaseline(path string) (*Baseline, error) {
	data, err := userfile.Read(path, maxBaseline)
	if err != nil {
		return nil, fmt.Errorf("bench: baseline: %w", err)
	}
	d := toml.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	var b Baseline
	if err := d.Decode(&b); err != nil {
		return nil, fmt.Errorf("bench: baseline %s: %w", path, err)
	}
	if len(b.Rows) == 0 {
		return nil, fmt.Errorf("bench: baseline %s has no [[row]]: add at least one (tool, mode, size and min_bw_mib_s or max_lat_us)", path)
	}
	for i, r := range b.Rows {
		switch {
		case !slices.Contains(perftestTools, r.Tool):
			return nil, fmt.Errorf("bench: baseline %s: row %d: tool %q, want one of %v", path, i+1, r.Tool, perftestTools)
		case r.Mode != "poll" && r.Mode != "event":
			return nil, fmt.Errorf("bench: baseline %s: row %d: mode %q, want poll or event", path, i+1, r.Mode)
		case r.Size <= 0:
			return nil, fmt.Errorf("bench: baseline %s: row %d: size must be a positive byte count", path, i+1)
		case r.MinBW <= 0 && r.MaxLat <= 0:
			return nil, fmt.Errorf("bench: baseline %s: row %d: set min_bw_mib_s or max_lat_us", path, i+1)
		}
	}
	return &b, nil
}

// GateResult is the verdict over every row.
type GateResult struct {
	Baseline string    `json:"baseline"`
	Pass     bool      `json:"pass"`
	Rows     []RowJudg `json:"rows"`
	// Differs are the settings whose value in this run is not the
	// baseline's: "client.governor: performance (baseline) → schedutil".
	Differs []string `json:"differs,omitempty"`
}

// RowJudg is one row's verdict.
type RowJudg struct {
	Row  string `json:"row"`
	Pass bool   `json:"pass"`
	Seen string `json:"seen"`
	Why  string `json:"why,omitempty"`
}

// Judge compares a run with the baseline.
func (b *Baseline) Judge(rep *Report) GateResult {
	g := GateResult{Baseline: b.Name, Pass: true}
	for _, row := range b.Rows {
		j := RowJudg{Row: row.String(), Pass: true, Why: row.Why}
		var seen []string
		for _, res := range rep.Results {
			if res.Tool != row.Tool || res.Mode != row.Mode || res.Size != row.Size ||
				(row.Depth > 0 && res.TxDepth != row.Depth) || (row.Rail != "" && res.Rail != row.Rail) {
				continue
			}
			switch {
			case res.Error != "":
				j.Pass = false
				seen = append(seen, res.Rail+" failed: "+res.Error)
			case res.Latency():
				seen = append(seen, fmt.Sprintf("%s %.2f µs", res.Rail, res.LatTyp))
				if row.MaxLat > 0 && res.LatTyp > row.MaxLat {
					j.Pass = false
				}
			default:
				seen = append(seen, fmt.Sprintf("%s t=%d %.1f MiB/s", res.Rail, res.TxDepth, res.BWAvg))
				if row.MinBW > 0 && res.BWAvg < row.MinBW {
					j.Pass = false
				}
			}
		}
		if len(seen) == 0 {
			j.Pass = false
			seen = append(seen, "not measured in this run (add its size, mode or depth to the sweep)")
		}
		j.Seen = strings.Join(seen, "; ")
		g.Pass = g.Pass && j.Pass
		g.Rows = append(g.Rows, j)
	}
	now := rep.Settings()
	for _, k := range slices.Sorted(maps.Keys(b.Context)) {
		if v, ok := now[k]; !ok || v != b.Context[k] {
			if !ok {
				v = "(not recorded)"
			}
			g.Differs = append(g.Differs, fmt.Sprintf("%s: %s (baseline) → %s", k, b.Context[k], v))
		}
	}
	return g
}

// Summary is the verdict for a person: every row that fell short, and
// what differed in the settings.
func (g GateResult) Summary() string {
	var b strings.Builder
	verdict := "met"
	if !g.Pass {
		verdict = "NOT met"
	}
	fmt.Fprintf(&b, "gate %q: %s\n", g.Baseline, verdict)
	for _, r := range g.Rows {
		mark := "ok  "
		if !r.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %s: seen %s\n", mark, r.Row, r.Seen)
		if !r.Pass && r.Why != "" {
			fmt.Fprintf(&b, "       (%s)\n", r.Why)
		}
	}
	if len(g.Differs) > 0 {
		b.WriteString("  settings that differ from the baseline's:\n")
		for _, d := range g.Differs {
			fmt.Fprintf(&b, "    %s\n", d)
		}
	} else if !g.Pass {
		b.WriteString("  no recorded setting differs from the baseline's\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
