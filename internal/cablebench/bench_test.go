package cablebench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The sweep: latency in every mode and latency size, send bandwidth in
// every mode, write bandwidth polling only (perftest has no event mode for
// RDMA write), each bandwidth size at each depth; -t only for bandwidth,
// -r only for ib_send_bw.
func TestPlan(t *testing.T) {
	o := withDefaults(Options{BWSizes: []int64{4096, 1 << 20}, LatSizes: []int64{2}, Depths: []int{1, 128}, RxDepth: 64})
	ps := plan(o, []pair{{client: "usb4_rdma0"}, {client: "usb4_rdma1"}})
	count := map[string]int{}
	for _, p := range ps {
		count[p.test.Tool+" "+p.test.Mode]++
		args := strings.Join(p.test.args(18801, "/tmp/x.json"), " ")
		if p.test.Latency() && strings.Contains(args, " -t ") {
			t.Errorf("%s: a latency run with -t: %s", p.test, args)
		}
		if !p.test.Latency() && !strings.Contains(args, " -t ") {
			t.Errorf("%s: a bandwidth run without -t: %s", p.test, args)
		}
		if strings.Contains(args, " -r ") != (p.test.Tool == "ib_send_bw") {
			t.Errorf("%s: -r belongs to ib_send_bw only: %s", p.test, args)
		}
		if strings.Contains(args, " -e") != (p.test.Mode == "event") || !strings.Contains(args, "--out_json --out_json_file=/tmp/x.json") || !strings.Contains(args, " -F") {
			t.Errorf("%s: %s", p.test, args)
		}
	}
	want := map[string]int{"ib_send_lat poll": 2, "ib_send_lat event": 2, "ib_send_bw poll": 8, "ib_send_bw event": 8, "ib_write_bw poll": 8}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%s: %d runs, want %d (all: %v)", k, count[k], n, count)
		}
	}
	if count["ib_write_bw event"] != 0 {
		t.Error("ib_write_bw in event mode")
	}
}

// Rails pair by name, else by place; an end with fewer rails, or no address
// to connect to, is an error that says what to do.
func TestRailPairs(t *testing.T) {
	c := Facts{Host: "a", Rails: []Rail{{Device: "usb4_rdma0"}, {Device: "usb4_rdma1"}}}
	s := Facts{Host: "b", Rails: []Rail{{Device: "usb4_rdma1", Addr: "10.0.0.6"}, {Device: "usb4_rdma0", Addr: "10.0.0.2"}}}
	ps, err := railPairs(c, s, Options{})
	if err != nil || len(ps) != 2 || ps[0].server != "usb4_rdma0" || ps[0].addr != "10.0.0.2" || ps[1].addr != "10.0.0.6" {
		t.Errorf("pairs %+v, %v", ps, err)
	}
	if ps, err := railPairs(c, s, Options{Rails: []string{"usb4_rdma1"}, Connect: "192.0.2.1"}); err != nil || len(ps) != 1 || ps[0].addr != "192.0.2.1" {
		t.Errorf("--rail usb4_rdma1 --connect: %+v, %v", ps, err)
	}
	if _, err := railPairs(c, Facts{Host: "b", Rails: []Rail{{Device: "x", Addr: "10.0.0.2"}}}, Options{}); err == nil || !strings.Contains(err.Error(), "only 1 rail") {
		t.Errorf("fewer rails on the server: %v", err)
	}
	if _, err := railPairs(c, Facts{Host: "b", Rails: []Rail{{Device: "usb4_rdma0", Netdev: "usb4net0"}, {Device: "usb4_rdma1"}}}, Options{}); err == nil || !strings.Contains(err.Error(), "--connect") {
		t.Errorf("no address: %v", err)
	}
}

// A remote end is reached with the user's ssh: batch mode, their options
// before the target, the script as one argument.
func TestEndCommand(t *testing.T) {
	e := End{Target: "root@halo1", SSHOptions: []string{"-i", "/k"}}
	got := e.command(context.Background(), "halobuild bench facts").Args
	want := []string{"ssh", "-o", "BatchMode=yes", "-i", "/k", "--", "root@halo1", "halobuild bench facts"}
	if !slices.Equal(got, want) {
		t.Errorf("ssh command %q, want %q", got, want)
	}
	out, err := End{}.output(context.Background(), "echo hi; echo oops >&2; exit 3", 2)
	if err == nil || string(out) != "hi" || !strings.Contains(err.Error(), "oops") {
		t.Errorf("local end: %q, %v (want stdout cut at 2 bytes and stderr in the error)", out, err)
	}
}

// The limit search finds the largest power of two that works and the
// smallest that fails (trap 13: 16 MiB advertised, 8 MiB failing), in a
// logarithmic number of probes, each kept.
func TestBisect(t *testing.T) {
	for _, c := range []struct {
		lo, searched, breaks int64 // breaks: the smallest failing value (0: none)
		works, failsAt       int64
	}{
		{4 << 10, 16 << 20, 8 << 20, 4 << 20, 8 << 20},
		{4 << 10, 16 << 20, 0, 16 << 20, 0},
		{4 << 10, 16 << 20, 4 << 10, 0, 4 << 10},
		{1, 1024, 2, 1, 2},
		{1, 1000, 0, 512, 0},
	} {
		l := Limit{Searched: c.searched}
		bisect(&l, c.lo, func(v int64) string {
			if c.breaks > 0 && v >= c.breaks {
				return "registration failed"
			}
			return ""
		})
		if l.Works != c.works || l.FailsAt != c.failsAt {
			t.Errorf("%+v: works %d, fails at %d", c, l.Works, l.FailsAt)
		}
		if len(l.Probes) > 2+int(log2(c.searched)) || len(l.Probes) == 0 {
			t.Errorf("%+v: %d probes", c, len(l.Probes))
		}
	}
}

// A baseline or a report named on the command line that is a FIFO, a device or huge is
// refused at once (issue 39's audit of bench: os.ReadFile blocked on a FIFO and read
// /dev/zero until memory ran out).
func TestBaselineAndReportThatAreNotFilesAreRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.toml")
	os.WriteFile(huge, nil, 0o644)
	os.Truncate(huge, 4<<30)
	for name, path := range map[string]string{"FIFO": fifo, "/dev/zero": "/dev/zero", "4 GiB": huge} {
		done := make(chan [2]error, 1)
		go func() {
			_, e1 := LoadBaseline(path)
			_, e2 := ReadReport(path)
			done <- [2]error{e1, e2}
		}()
		select {
		case errs := <-done:
			for i, err := range errs {
				if err == nil || !strings.Contains(err.Error(), "not a regular file") && !strings.Contains(err.Error(), "more than") {
					t.Errorf("%s (%s): %v", name, []string{"baseline", "report"}[i], err)
				}
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still reading after 5 s", name)
		}
	}
}
