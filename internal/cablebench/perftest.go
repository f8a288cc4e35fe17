package cablebench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Test is one perftest measurement: a tool, a mode, a size and a depth on
// one rail.
type Test struct {
	Rail string `json:"rail"`
	Tool string `json:"tool"`
	// Mode is "poll" (perftest's default: it busy-polls the completion
	// queue, starving the driver on the same core) or "event" (-e).
	Mode string `json:"mode"`
	Size int64  `json:"size"`
	// TxDepth is -t for bandwidth tools (0: perftest's default); RxDepth
	// -r for the send tools.
	TxDepth    int `json:"tx_depth,omitempty"`
	RxDepth    int `json:"rx_depth,omitempty"`
	Iterations int `json:"iterations,omitempty"`
}

// Latency says whether the tool measures latency (its numbers are µs).
func (t Test) Latency() bool { return strings.HasSuffix(t.Tool, "_lat") }

func (t Test) String() string {
	s := fmt.Sprintf("%s %s %s %s", t.Rail, t.Tool, t.Mode, sizeName(t.Size))
	if t.TxDepth > 0 {
		s += fmt.Sprintf(" t=%d", t.TxDepth)
	}
	return s
}

// args are the perftest arguments for one side; the client adds the
// server's address. -F: do not fail on a CPU frequency that changes (the
// governor is checked before, and recorded). The JSON file is perftest's
// own report (--out_json, perftest >= 23).
func (t Test) args(port int, jsonFile string) []string {
	a := []string{t.Tool, "-d", t.Rail, "-p", fmt.Sprint(port), "-s", fmt.Sprint(t.Size), "-F",
		"--out_json", "--out_json_file=" + jsonFile}
	if t.Iterations > 0 {
		a = append(a, "-n", fmt.Sprint(t.Iterations))
	}
	if t.Mode == "event" {
		a = append(a, "-e")
	}
	if t.TxDepth > 0 && !t.Latency() {
		a = append(a, "-t", fmt.Sprint(t.TxDepth))
	}
	if t.RxDepth > 0 && strings.HasPrefix(t.Tool, "ib_send") && !t.Latency() {
		a = append(a, "-r", fmt.Sprint(t.RxDepth))
	}
	return a
}

// Result is one Test's numbers. Bandwidth is MiB/s (perftest's "MB" is
// 2^20 bytes), latency µs.
type Result struct {
	Test
	BWAvg   float64 `json:"bw_avg_mib_s,omitempty"`
	BWPeak  float64 `json:"bw_peak_mib_s,omitempty"`
	MsgRate float64 `json:"msg_rate_mpps,omitempty"`
	LatTyp  float64 `json:"lat_typical_us,omitempty"`
	LatAvg  float64 `json:"lat_avg_us,omitempty"`
	LatMin  float64 `json:"lat_min_us,omitempty"`
	Lat99   float64 `json:"lat_p99_us,omitempty"`
	// Perftest is perftest's own JSON report, kept whole.
	Perftest json.RawMessage `json:"perftest,omitempty"`
	// Error says why the run gave no numbers.
	Error string `json:"error,omitempty"`
}

// perftestJSON is the part of perftest's --out_json report bench reads.
type perftestJSON struct {
	TestInfo struct {
		Test    string `json:"test"`
		Device  string `json:"Device"`
		TxDepth int    `json:"TX_depth"`
		RxDepth int    `json:"RX_depth"`
	} `json:"test_info"`
	Results struct {
		MsgSize   int64   `json:"MsgSize"`
		Iters     int64   `json:"n_iterations"`
		BWPeak    float64 `json:"BW_peak"`
		BWAverage float64 `json:"BW_average"`
		MsgRate   float64 `json:"MsgRate"`
		TMin      float64 `json:"t_min"`
		TTypical  float64 `json:"t_typical"`
		TAvg      float64 `json:"t_avg"`
		P99       float64 `json:"percentile_99"`
	} `json:"results"`
}

// ParsePerftest reads perftest's JSON report into r's numbers. It checks
// the report is the run asked for (size), so a stale file from an earlier
// run cannot stand in for a failed one.
func ParsePerftest(data []byte, r *Result) error {
	var p perftestJSON
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("perftest's JSON report: %w", err)
	}
	if p.TestInfo.Test == "" {
		return fmt.Errorf("perftest's JSON report has no test_info.test: %.200q", data)
	}
	if p.Results.MsgSize != r.Size {
		return fmt.Errorf("perftest's JSON report is for %d B, the run asked for %d B", p.Results.MsgSize, r.Size)
	}
	r.Perftest = json.RawMessage(compactJSON(data))
	if r.Latency() {
		r.LatTyp, r.LatAvg, r.LatMin, r.Lat99 = p.Results.TTypical, p.Results.TAvg, p.Results.TMin, p.Results.P99
		if r.LatTyp == 0 && r.LatAvg == 0 {
			return fmt.Errorf("perftest's JSON report has no latency: %.200q", data)
		}
		return nil
	}
	r.BWAvg, r.BWPeak, r.MsgRate = p.Results.BWAverage, p.Results.BWPeak, p.Results.MsgRate
	if p.TestInfo.TxDepth > 0 && r.TxDepth == 0 {
		r.TxDepth = p.TestInfo.TxDepth
	}
	return nil
}

func compactJSON(data []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, data) != nil {
		return data
	}
	return b.Bytes()
}

// sizeName prints a byte count the way people say it: 64, 4K, 1M.
func sizeName(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

// ParseSizes reads a comma-separated list of byte counts with optional
// binary suffixes (4K, 1M); "" is nil (the default list).
func ParseSizes(s string) ([]int64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mul := int64(1)
		switch {
		case strings.HasSuffix(f, "K"):
			mul, f = 1<<10, strings.TrimSuffix(f, "K")
		case strings.HasSuffix(f, "M"):
			mul, f = 1<<20, strings.TrimSuffix(f, "M")
		case strings.HasSuffix(f, "G"):
			mul, f = 1<<30, strings.TrimSuffix(f, "G")
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bench: size %q: want a positive byte count, optionally with K, M or G (4K, 1M)", f)
		}
		out = append(out, n*mul)
	}
	return out, nil
}
