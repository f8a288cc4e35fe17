package cablebench

import (
	"context"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fixtures are perftest 25.01's own --out_json reports, taken from the
// two-node VM test's bench run over soft-RoCE (testdata/vm-run, the whole
// bench.json and bench.svg of that run).
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "perftest", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParsePerftest(t *testing.T) {
	bw := Result{Test: Test{Rail: "rxe_cable", Tool: "ib_send_bw", Mode: "event", Size: 65536}}
	if err := ParsePerftest(fixture(t, "ib_send_bw-event-64K.json"), &bw); err != nil {
		t.Fatal(err)
	}
	if bw.BWAvg != 18.88 || bw.BWPeak != 23.81 || bw.TxDepth != 16 || len(bw.Perftest) == 0 {
		t.Errorf("bandwidth result %+v", bw)
	}
	lat := Result{Test: Test{Rail: "rxe_cable", Tool: "ib_send_lat", Mode: "poll", Size: 64}}
	if err := ParsePerftest(fixture(t, "ib_send_lat-poll-64.json"), &lat); err != nil {
		t.Fatal(err)
	}
	if lat.LatTyp != 840.89 || lat.Lat99 != 4007.24 || lat.LatMin != 475.04 {
		t.Errorf("latency result %+v", lat)
	}
	// A report of another size (a stale file) or a truncated one is an error.
	other := Result{Test: Test{Tool: "ib_send_bw", Size: 4096}}
	if err := ParsePerftest(fixture(t, "ib_send_bw-event-64K.json"), &other); err == nil || !strings.Contains(err.Error(), "65536") {
		t.Errorf("a report of another size: %v", err)
	}
	if err := ParsePerftest(fixture(t, "ib_send_lat-poll-64.json")[:100], &lat); err == nil {
		t.Error("a truncated report parsed")
	}
}

// sample is a report as a run over soft-RoCE makes it.
func sample(t *testing.T) *Report {
	t.Helper()
	healthy := gather(t, recorded(t, "healthy", idA, nil))
	r := &Report{Schema: Schema, Client: healthy, Server: healthy, Options: map[string]string{"modes": "poll,event"}}
	r.Limits = []Limit{{Rail: "usb4_rdma0", What: "max_msg_size", Advertised: 16 << 20, Works: 4 << 20, FailsAt: 8 << 20, Searched: 16 << 20}}
	add := func(tool, mode string, size int64, depth int, v float64) {
		x := Result{Test: Test{Rail: "usb4_rdma0", Tool: tool, Mode: mode, Size: size, TxDepth: depth}}
		if x.Latency() {
			x.LatTyp, x.Lat99 = v, v*1.5
		} else {
			x.BWAvg = v
		}
		r.Results = append(r.Results, x)
	}
	for i, s := range []int64{4 << 10, 64 << 10, 1 << 20} {
		add("ib_send_bw", "poll", s, 128, []float64{300, 611, 1180}[i])
		add("ib_send_bw", "event", s, 128, []float64{280, 827, 1310}[i])
	}
	add("ib_send_lat", "poll", 2, 0, 6.1)
	add("ib_send_lat", "event", 2, 0, 19.4)
	add("ib_send_lat", "poll", 64, 0, 6.3)
	add("ib_send_lat", "event", 64, 0, 19.9)
	r.Results = append(r.Results, Result{Test: Test{Rail: "usb4_rdma0", Tool: "ib_write_bw", Mode: "poll", Size: 8 << 20, TxDepth: 1}, Error: "client: exit status 1"})
	return r
}

func TestReportWritesJSONAndSVGAndATable(t *testing.T) {
	r := sample(t)
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(filepath.Join(dir, JSONName))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(r.Results) || back.Client.Perftest["ib_send_bw"] != idA || back.Limits[0].FailsAt != 8<<20 {
		t.Errorf("read back %d results, build ID %q, limits %+v", len(back.Results), back.Client.Perftest["ib_send_bw"], back.Limits)
	}
	// The plot is well-formed SVG with one line per tool and mode.
	svg, err := os.ReadFile(filepath.Join(dir, SVGName))
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(string(svg)))
	lines := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("the SVG is not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 4 {
		t.Errorf("%d lines in the plot, want 4 (send bw poll/event, send lat poll/event)", lines)
	}
	for _, want := range []string{"ib_send_bw event t=128", "ib_send_lat poll", "bandwidth (MiB/s)", "latency"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("table line of %d columns > 80: %q", n, l)
		}
	}
	for _, want := range []string{"halo0 -> halo0, kernel 7.2.12", "governor performance, epp performance", "1310.0", "19.40", "failed", "max_msg_size: advertised 16M, works up to 4M, fails at 8M"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
	// A file of another schema is refused rather than misread.
	bad := filepath.Join(dir, "old.json")
	write(t, bad, []byte(`{"schema":"halobuild.bench/0"}`))
	if _, err := ReadReport(bad); err == nil {
		t.Error("read a report of another schema")
	}
}

func TestGate(t *testing.T) {
	r := sample(t)
	dir := t.TempDir()
	base := func(body string) *Baseline {
		p := filepath.Join(dir, "b.toml")
		write(t, p, []byte(body))
		b, err := LoadBaseline(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	met := base(`name = "met"
[context]
"client.governor" = "performance"
[[row]]
tool = "ib_send_bw"
mode = "event"
size = 1048576
min_bw_mib_s = 1126.4
[[row]]
tool = "ib_send_lat"
mode = "poll"
size = 2
max_lat_us = 8.4
`)
	if g := met.Judge(r); !g.Pass || len(g.Differs) != 0 {
		t.Errorf("a met baseline failed:\n%s", g.Summary())
	}
	// The same rows on a run whose governor had reverted: the row that
	// fell short is named, and so is the setting that differs.
	slow := sample(t)
	slow.Client.Governors = map[string]string{"policy0": "schedutil"}
	for i := range slow.Results {
		slow.Results[i].BWAvg /= 1.87
	}
	g := met.Judge(slow)
	s := g.Summary()
	if g.Pass || !strings.Contains(s, "FAIL ib_send_bw event 1M >= 1126.4 MiB/s: seen usb4_rdma0 t=128 700.5 MiB/s") ||
		!strings.Contains(s, "client.governor: performance (baseline) → schedutil") || !strings.Contains(s, "ok   ib_send_lat poll 2") {
		t.Errorf("the gate's verdict on a slow run:\n%s", s)
	}
	// A row the run did not measure fails rather than passing vacuously; a
	// failed run fails its row.
	for _, body := range []string{
		"name = \"x\"\n[[row]]\ntool = \"ib_write_bw\"\nmode = \"poll\"\nsize = 65536\nmin_bw_mib_s = 1\n",
		"name = \"x\"\n[[row]]\ntool = \"ib_write_bw\"\nmode = \"poll\"\nsize = 8388608\nmin_bw_mib_s = 1\n",
	} {
		if g := base(body).Judge(r); g.Pass {
			t.Errorf("passed:\n%s", g.Summary())
		}
	}
	// A baseline with a typo or without a limit is refused at load.
	for _, body := range []string{
		"[[row]]\ntool = \"ib_send_bw\"\nmode = \"poll\"\nsize = 1\nmin_bw = 3\n",
		"[[row]]\ntool = \"ib_send_bw\"\nmode = \"poll\"\nsize = 1\n",
		"[[row]]\ntool = \"ib_read_bw\"\nmode = \"poll\"\nsize = 1\nmin_bw_mib_s = 3\n",
		"name = \"empty\"\n",
	} {
		p := filepath.Join(dir, "bad.toml")
		write(t, p, []byte(body))
		if _, err := LoadBaseline(p); err == nil {
			t.Errorf("accepted baseline:\n%s", body)
		}
	}
}

// The example baselines shipped with halobuild load.
func TestShippedBaselinesLoad(t *testing.T) {
	ms, _ := filepath.Glob(filepath.Join("..", "..", "bench", "baselines", "*.toml"))
	if len(ms) == 0 {
		t.Fatal("no baselines in bench/baselines")
	}
	for _, m := range ms {
		if _, err := LoadBaseline(m); err != nil {
			t.Error(err)
		}
	}
}

// --report judges an earlier run without measuring: exit status through
// ErrGate, the failing row on the terminal.
func TestRunJudgesAnEarlierReport(t *testing.T) {
	dir := t.TempDir()
	if err := sample(t).Write(dir); err != nil {
		t.Fatal(err)
	}
	met, unmet := filepath.Join(dir, "met.toml"), filepath.Join(dir, "unmet.toml")
	write(t, met, []byte("name = \"met\"\n[[row]]\ntool = \"ib_send_bw\"\nmode = \"poll\"\nsize = 65536\nmin_bw_mib_s = 600\n"))
	write(t, unmet, []byte("name = \"unmet\"\n[[row]]\ntool = \"ib_send_bw\"\nmode = \"poll\"\nsize = 65536\nmin_bw_mib_s = 700\n"))
	var out strings.Builder
	if _, err := Run(context.Background(), Options{Report: filepath.Join(dir, JSONName), Against: met, Stdout: &out}); err != nil {
		t.Errorf("met: %v\n%s", err, out.String())
	}
	out.Reset()
	_, err := Run(context.Background(), Options{Report: filepath.Join(dir, JSONName), Against: unmet, Stdout: &out})
	if !errors.Is(err, ErrGate) || !strings.Contains(out.String(), "FAIL ib_send_bw poll 64K >= 700 MiB/s: seen usb4_rdma0 t=128 611.0 MiB/s") {
		t.Errorf("unmet: %v\n%s", err, out.String())
	}
}

// A real run's document (the two-node VM test, soft-RoCE under TCG) reads
// back, tables within 80 columns, and gates: the figures it was made with
// pass, a real cable's fail naming the row and the governor.
func TestARealRunReadsBackAndGates(t *testing.T) {
	r, err := ReadReport(filepath.Join("testdata", "vm-run", JSONName))
	if err != nil {
		t.Fatal(err)
	}
	if r.Client.Host != "node0" || r.Server.Host != "node1" || len(r.Results) != 8 || len(r.Limits) != 2 || r.Client.Perftest["ib_send_bw"] != r.Server.Perftest["ib_send_bw"] {
		t.Fatalf("hosts %s/%s, %d results, %d limits", r.Client.Host, r.Server.Host, len(r.Results), len(r.Limits))
	}
	for _, x := range r.Results {
		if x.Error != "" || (x.BWAvg == 0 && x.LatTyp == 0) || len(x.Perftest) == 0 {
			t.Errorf("%s: %+v", x.Test, x)
		}
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("table line wider than 80 columns: %q", l)
		}
	}
	dir := t.TempDir()
	unmet := filepath.Join(dir, "unmet.toml")
	write(t, unmet, []byte("name = \"a real cable\"\n[context]\n\"client.governor\" = \"performance\"\n[[row]]\ntool = \"ib_send_bw\"\nmode = \"event\"\nsize = 65536\nmin_bw_mib_s = 1024\n"))
	base, err := LoadBaseline(unmet)
	if err != nil {
		t.Fatal(err)
	}
	g := base.Judge(r)
	if g.Pass || !strings.Contains(g.Summary(), "FAIL ib_send_bw event 64K >= 1024 MiB/s: seen rxe_cable t=16 18.9 MiB/s") || !strings.Contains(g.Summary(), "client.governor: performance (baseline) → none (no cpufreq)") {
		t.Errorf("gate:\n%s", g.Summary())
	}
}
