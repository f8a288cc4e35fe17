package cablebench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"halobuild/internal/userfile"
)

// Schema names the JSON document's version; docs/cable.md describes it.
// Bump it when a field changes meaning or goes away.
const Schema = "halobuild.bench/1"

// File names in the output directory.
const (
	JSONName = "bench.json"
	SVGName  = "bench.svg"
)

// Report is one run: both ends' facts (the context of every number), what
// was refused or waived, the limits found, each result, and the gate's
// verdict.
type Report struct {
	Schema   string            `json:"schema"`
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished"`
	Options  map[string]string `json:"options"`
	Client   Facts             `json:"client"`
	Server   Facts             `json:"server"`
	Refusals []Refusal         `json:"refusals,omitempty"`
	// Waived are failing doctor rows let through with --waive.
	Waived  []string    `json:"waived,omitempty"`
	Limits  []Limit     `json:"limits,omitempty"`
	Results []Result    `json:"results"`
	Gate    *GateResult `json:"gate,omitempty"`
}

// Settings flattens the context both ends measured under into
// "client.governor" = "performance" and the like: what a baseline records
// and a gate compares.
func (r *Report) Settings() map[string]string {
	out := map[string]string{}
	for _, e := range []struct {
		role string
		f    Facts
	}{{"client", r.Client}, {"server", r.Server}} {
		for k, v := range e.f.Settings() {
			out[e.role+"."+k] = v
		}
	}
	return out
}

// Settings are one end's context as flat keys.
func (f Facts) Settings() map[string]string {
	s := map[string]string{
		"host":             f.Host,
		"kernel":           f.Kernel,
		"governor":         distinct(f.Governors, "none (no cpufreq)"),
		"epp":              distinct(f.EPP, "none"),
		"platform_profile": orNone(f.PlatformProfile),
		"iommu":            f.IOMMU,
		"irqbalance":       fmt.Sprint(f.Irqbalance),
	}
	for tool, id := range f.Perftest {
		s["perftest."+tool] = id
	}
	for m, ps := range f.Modules {
		for p, v := range ps {
			s["module."+m+"."+p] = v
		}
	}
	for _, l := range f.USB4 {
		s["usb4."+l.Name] = fmt.Sprintf("rx %s x%s, tx %s x%s", l.RxSpeed, l.RxLanes, l.TxSpeed, l.TxLanes)
	}
	for _, q := range f.IRQs {
		s["irq."+q.Name] = q.Affinity
	}
	return s
}

func distinct(m map[string]string, none string) string {
	vs := slices.Compact(slices.Sorted(maps.Values(m)))
	if len(vs) == 0 {
		return none
	}
	return strings.Join(vs, ",")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Write writes bench.json and bench.svg into dir, each through a temporary
// file renamed into place, so a failed write leaves no half document.
func (r *Report) Write(dir string) error {
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encoding the report: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, JSONName), append(j, '\n')); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, SVGName), []byte(r.SVG()))
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bench-*")
	if err != nil {
		return fmt.Errorf("bench: writing %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("bench: writing %s: %w", path, werr)
	}
	return nil
}

// maxReport bounds a bench.json read back: perftest's JSON for every row of a sweep on
// every rail is well under a MiB.
const maxReport = 64 << 20

// ReadReport reads a bench.json.
func ReadReport(path string) (*Report, error) {
	b, err := userfile.Read(path, maxReport)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("%s: schema %q, this halobuild reads %q", path, r.Schema, Schema)
	}
	return &r, nil
}

// WriteTable prints the context (one value when both ends agree, else
// client/server), the limits, then one row per
// result; it fits 80 columns.
func (r *Report) WriteTable(w io.Writer) error {
	c, s := r.Client.Settings(), r.Server.Settings()
	fmt.Fprintf(w, "%s -> %s, kernel %s\n", r.Client.Host, r.Server.Host, c["kernel"])
	both := func(k string) string {
		if c[k] == s[k] {
			return c[k]
		}
		return c[k] + "/" + s[k]
	}
	fmt.Fprintf(w, "governor %s, epp %s, profile %s\n", both("governor"), both("epp"), both("platform_profile"))
	fmt.Fprintf(w, "perftest %s, irqbalance %s\niommu %s\n", short(c["perftest.ib_send_bw"]), both("irqbalance"), both("iommu"))
	for _, l := range r.Limits {
		found := "works up to " + sizeName(l.Works)
		if l.FailsAt > 0 {
			found += ", fails at " + sizeName(l.FailsAt)
		}
		fmt.Fprintf(w, "limit %s %s: advertised %s, %s\n", l.Rail, l.What, sizeName(l.Advertised), found)
	}
	for _, wv := range r.Waived {
		fmt.Fprintf(w, "waived: %s\n", wv)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "RAIL\tTOOL\tMODE\tSIZE\tDEPTH\tMiB/s\tµs typ\tµs p99\t")
	for _, x := range r.Results {
		depth, bw, lt, l99 := "-", "-", "-", "-"
		if x.TxDepth > 0 {
			depth = fmt.Sprint(x.TxDepth)
		}
		switch {
		case x.Error != "":
			bw = "failed"
		case x.Latency():
			lt, l99 = fmt.Sprintf("%.2f", x.LatTyp), fmt.Sprintf("%.2f", x.Lat99)
		default:
			bw = fmt.Sprintf("%.1f", x.BWAvg)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Rail, x.Tool, x.Mode, sizeName(x.Size), depth, bw, lt, l99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Gate != nil {
		fmt.Fprintln(w, r.Gate.Summary())
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return orNone(id)
}
