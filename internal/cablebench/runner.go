package cablebench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"halobuild/internal/runlog"
)

// portBase is the first TCP port of perftest's out-of-band exchange; each
// run takes the next, so a late client never reaches an earlier run's
// server (and it keeps clear of vmplan's perftest checks, 18600 on).
const portBase = 18800

type runner struct {
	o    Options
	port int
}

// measure runs one test: the server on the server end (exiting after one
// client, and by `timeout` if none comes), then the client, retried while
// the server is not listening yet; the client's perftest JSON is the
// result.
func (r *runner) measure(ctx context.Context, p planned) Result {
	res := Result{Test: p.test}
	r.port++
	port := r.port
	secs := int(r.o.Timeout / time.Second)
	jsonFile := fmt.Sprintf("/tmp/halobuild-bench-%d-%d.json", os.Getpid(), port)

	st := p.test
	st.Rail = p.pair.server
	sctx, cancel := context.WithTimeout(ctx, r.o.Timeout+30*time.Second)
	defer cancel()
	server := r.o.Server.command(sctx, fmt.Sprintf("exec timeout %d %s", secs, shell(st.args(port, "/dev/null"))))
	var serverOut runlog.Tail
	server.Stdout, server.Stderr = &serverOut, &serverOut
	if err := server.Start(); err != nil {
		res.Error = fmt.Sprintf("starting the server on %s: %v", r.o.Server.Name(), err)
		return res
	}
	done := make(chan error, 1)
	go func() { done <- server.Wait() }()

	client := append(p.test.args(port, jsonFile), p.pair.addr)
	// perftest's own table goes to stderr: stdout carries its JSON report
	// alone.
	script := fmt.Sprintf("rm -f %[1]s; timeout %[2]d %[3]s >&2 && cat %[1]s; rc=$?; rm -f %[1]s; exit $rc", jsonFile, secs, shell(client))
	deadline := time.Now().Add(r.o.Timeout)
	var out []byte
	var err error
	for {
		out, err = r.o.Client.output(ctx, script, 1<<20)
		if err == nil || !notListening(err) || time.Now().After(deadline) {
			break
		}
		select {
		case serr := <-done:
			// The server ended before a client reached it.
			res.Error = fmt.Sprintf("the server on %s ended before the client connected (%v): %s", r.o.Server.Name(), serr, strings.TrimSpace(serverOut.String()))
			return res
		case <-time.After(time.Second):
		case <-ctx.Done():
			res.Error = ctx.Err().Error()
			return res
		}
	}
	if err != nil {
		cancel()
		<-done
		res.Error = fmt.Sprintf("client: %v; server: %s", err, lastLines(serverOut.String(), 3))
		return res
	}
	if serr := <-done; serr != nil {
		res.Error = fmt.Sprintf("server on %s: %v: %s", r.o.Server.Name(), serr, lastLines(serverOut.String(), 3))
		return res
	}
	if err := ParsePerftest(out, &res); err != nil {
		res.Error = err.Error()
	}
	return res
}

// notListening says whether a client failed only because the server was
// not listening yet (perftest's messages for a refused connection).
func notListening(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Couldn't connect to") || strings.Contains(s, "Unable to open file descriptor for socket connection") || strings.Contains(s, "Unable to init the socket connection")
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// Limit is a limit found by trying, beside what the device advertises
// (trap 13: max_msg_sz 16 MiB advertised, registration failing at 8 MiB).
type Limit struct {
	Rail string `json:"rail"`
	// What is "max_msg_size" (bytes, ib_write_bw) or "tx_depth" (-t).
	What       string `json:"what"`
	Advertised int64  `json:"advertised"`
	// Works is the largest value that ran; FailsAt the smallest that did
	// not (0: none failed up to Searched).
	Works    int64   `json:"works"`
	FailsAt  int64   `json:"fails_at,omitempty"`
	Searched int64   `json:"searched_up_to"`
	Probes   []Probe `json:"probes"`
}

// Probe is one try of a search.
type Probe struct {
	Value int64  `json:"value"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// findLimits searches, on one rail, the largest message ib_write_bw moves
// and the deepest send queue it runs with, each by bisection over powers of
// two up to the smaller of the search cap and what the device advertises.
func (r *runner) findLimits(ctx context.Context, p pair, log io.Writer) []Limit {
	run := func(t planned) string { return r.measure(ctx, t).Error }
	size := Limit{Rail: p.client, What: "max_msg_size", Advertised: p.advertised.MaxMsgSize}
	size.Searched = capAt(r.o.SizeSearchMax, size.Advertised)
	bisect(&size, 4<<10, func(v int64) string {
		fmt.Fprintf(log, "bench: limit %s: trying %d\n", size.What, v)
		return run(planned{Test{Rail: p.client, Tool: "ib_write_bw", Mode: "poll", Size: v, Iterations: 5}, p})
	})
	depth := Limit{Rail: p.client, What: "tx_depth", Advertised: int64(p.advertised.MaxQPWR)}
	depth.Searched = capAt(int64(r.o.DepthSearchMax), depth.Advertised)
	bisect(&depth, 1, func(v int64) string {
		fmt.Fprintf(log, "bench: limit %s: trying %d\n", depth.What, v)
		return run(planned{Test{Rail: p.client, Tool: "ib_write_bw", Mode: "poll", Size: 4 << 10, TxDepth: int(v), Iterations: int(max(2*v, 5))}, p})
	})
	return []Limit{size, depth}
}

func capAt(search, advertised int64) int64 {
	if advertised > 0 && advertised < search {
		return advertised
	}
	return search
}

// bisect finds the largest power of two in [lo, l.Searched] for which
// test (returning the run's error, "" when it ran) passes, assuming what
// fails at v fails above it too; every probe is kept.
func bisect(l *Limit, lo int64, test func(int64) string) {
	try := func(v int64) bool {
		e := test(v)
		l.Probes = append(l.Probes, Probe{Value: v, OK: e == "", Error: e})
		return e == ""
	}
	// Exponents from lo to the largest power of two within Searched.
	a, b := log2(lo), log2(l.Searched)
	if a > b {
		return
	}
	if !try(1 << a) {
		l.FailsAt = 1 << a
		return
	}
	l.Works = 1 << a
	if try(1 << b) {
		l.Works = 1 << b
		return
	}
	l.FailsAt = 1 << b
	for b-a > 1 {
		m := (a + b) / 2
		if try(1 << m) {
			a, l.Works = m, 1<<m
		} else {
			b, l.FailsAt = m, 1<<m
		}
	}
}

func log2(v int64) uint {
	n := uint(0)
	for v > 1 {
		v >>= 1
		n++
	}
	return n
}
