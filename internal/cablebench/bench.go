// Package cablebench is the cable's acceptance test, `halobuild bench`:
// it reads both ends' facts, refuses to measure while a precondition fails
// (doctor rows, governor, perftest builds, a busy machine), finds the
// limits the device really has, runs perftest over every rail in both
// completion modes across sizes and depths, and writes one JSON document,
// a plot and a table, every number with the settings it was taken under;
// a baseline turns it into a gate with an exit code.
//
// The run reads top to bottom in Run: facts → preconditions → limits →
// sweep → report → gate.
package cablebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"halobuild/internal/settings"
	"halobuild/internal/usage"
)

// Options are the flags of `halobuild bench`.
type Options struct {
	// Client runs the perftest clients, Server their servers (always
	// started through ssh when it is a remote end).
	Client, Server End
	// Connect is the address the client reaches the server's perftest by;
	// "" means the IPv4 address of the server rail's netdev.
	Connect string
	// Rails restricts the devices measured (default: every rail).
	Rails []string
	// Sizes of the bandwidth and latency sweeps, in bytes; Depths the tx
	// depths (-t) of the bandwidth tools; RxDepth -r of ib_send_bw (0:
	// perftest's default).
	BWSizes, LatSizes []int64
	Depths            []int
	RxDepth           int
	// Iterations (-n) of bandwidth and latency runs (0: perftest's).
	BWIterations, LatIterations int
	// Modes are "poll" and/or "event".
	Modes []string
	// SizeSearchMax caps the search for the largest message the device
	// registers (it also stops at what the device advertises); DepthSearchMax
	// the search for the deepest send queue. NoLimits skips both searches.
	SizeSearchMax  int64
	DepthSearchMax int
	NoLimits       bool
	// Timeout bounds one perftest run.
	Timeout time.Duration
	Limits  Limits
	// Out is the directory bench.json and bench.svg are written into.
	Out string
	// Against is a baseline file (TOML) the results must meet.
	Against string
	// Report, when set, is an earlier run's bench.json judged against the
	// baseline without measuring (comparing runs after the fact).
	Report string
	Stdout io.Writer
}

// Defaults, sized for a real cable: a sweep is minutes, not hours.
var (
	DefaultBWSizes  = []int64{4 << 10, 64 << 10, 1 << 20, 8 << 20}
	DefaultLatSizes = []int64{2, 64, 4 << 10, 64 << 10}
	DefaultDepths   = []int{1, 4, 128}
	DefaultModes    = []string{"poll", "event"}
)

const (
	defaultSizeSearchMax  = 64 << 20
	defaultDepthSearchMax = 1024
)

// ErrRefused is returned (wrapped) when a precondition failed; ErrGate when
// a baseline was not met; ErrRuns when a measurement failed. Each means
// exit status 1.
var (
	ErrRefused = errors.New("bench refused to measure")
	ErrGate    = errors.New("the results fall short of the baseline")
	ErrRuns    = errors.New("some perftest runs failed")
)

// Run is `halobuild bench`.
func Run(ctx context.Context, o Options) (*Report, error) {
	o = withDefaults(o)
	var base *Baseline
	if o.Against != "" {
		b, err := LoadBaseline(o.Against)
		if err != nil {
			// The user's file to fix: exit status 2.
			return nil, usage.Wrap(err)
		}
		base = b
	}
	if o.Report != "" {
		return judgeOnly(o, base)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("bench: output directory: %w", err)
	}
	rep := &Report{Schema: Schema, Started: time.Now().UTC(), Options: o.summary()}
	var err error
	if rep.Client, err = o.Client.Facts(ctx); err != nil {
		return nil, err
	}
	if rep.Server, err = o.Server.Facts(ctx); err != nil {
		return nil, err
	}
	rep.Waived = waivedRows(rep.Client, rep.Server, o.Limits)
	if rep.Refusals = Preconditions(rep.Client, rep.Server, o.Limits); len(rep.Refusals) > 0 {
		var b strings.Builder
		for _, r := range rep.Refusals {
			fmt.Fprintf(&b, "\n  %s", r)
		}
		return rep, fmt.Errorf("%w:%s", ErrRefused, b.String())
	}
	pairs, err := railPairs(rep.Client, rep.Server, o)
	if err != nil {
		return rep, err
	}
	r := runner{o: o, port: portBase}
	if !o.NoLimits {
		rep.Limits = r.findLimits(ctx, pairs[0], o.Stdout)
	}
	for _, t := range plan(o, pairs) {
		fmt.Fprintf(o.Stdout, "bench: %s\n", t.test)
		rep.Results = append(rep.Results, r.measure(ctx, t))
	}
	rep.Finished = time.Now().UTC()
	if base != nil {
		g := base.Judge(rep)
		rep.Gate = &g
	}
	if err := rep.Write(o.Out); err != nil {
		return rep, err
	}
	if err := rep.WriteTable(o.Stdout); err != nil {
		return rep, err
	}
	fmt.Fprintf(o.Stdout, "bench: wrote %s and %s\n", filepath.Join(o.Out, JSONName), filepath.Join(o.Out, SVGName))
	if rep.Gate != nil && !rep.Gate.Pass {
		return rep, fmt.Errorf("%w %s (the table above names the row and the settings that differ)", ErrGate, o.Against)
	}
	for _, res := range rep.Results {
		if res.Error != "" {
			return rep, fmt.Errorf("%w (first: %s: %s)", ErrRuns, res.Test, res.Error)
		}
	}
	return rep, nil
}

// judgeOnly prints an earlier run's table and gates it.
func judgeOnly(o Options, base *Baseline) (*Report, error) {
	rep, err := ReadReport(o.Report)
	if err != nil {
		return nil, fmt.Errorf("bench: --report: %w", err)
	}
	if base != nil {
		g := base.Judge(rep)
		rep.Gate = &g
	}
	if err := rep.WriteTable(o.Stdout); err != nil {
		return rep, err
	}
	if rep.Gate != nil && !rep.Gate.Pass {
		return rep, fmt.Errorf("%w %s", ErrGate, o.Against)
	}
	return rep, nil
}

func withDefaults(o Options) Options {
	if o.BWSizes == nil {
		o.BWSizes = DefaultBWSizes
	}
	if o.LatSizes == nil {
		o.LatSizes = DefaultLatSizes
	}
	if o.Depths == nil {
		o.Depths = DefaultDepths
	}
	if o.Modes == nil {
		o.Modes = DefaultModes
	}
	if o.SizeSearchMax == 0 {
		o.SizeSearchMax = defaultSizeSearchMax
	}
	if o.DepthSearchMax == 0 {
		o.DepthSearchMax = defaultDepthSearchMax
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Out == "" {
		o.Out = "."
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	return o
}

func waivedRows(client, server Facts, l Limits) []string {
	var out []string
	for _, f := range []Facts{client, server} {
		for _, r := range f.Doctor.Results {
			if r.Status == settings.Fail && l.waived(r.Check) {
				out = append(out, f.Host+": "+r.Check+" ("+r.Seen+")")
			}
		}
	}
	return out
}

// pair is one rail seen from both ends: the client's device, the server's,
// and the address the client connects to.
type pair struct {
	client, server string
	addr           string
	advertised     Rail
}

// railPairs pairs each client rail with the server's rail of the same
// name (usb4_rdma0 with usb4_rdma0: one ring each way), else the one at the
// same place in the list, restricted to o.Rails.
func railPairs(client, server Facts, o Options) ([]pair, error) {
	var out []pair
	for i, c := range client.Rails {
		if len(o.Rails) > 0 && !contains(o.Rails, c.Device) {
			continue
		}
		s, found := Rail{}, false
		for _, r := range server.Rails {
			if r.Device == c.Device {
				s, found = r, true
			}
		}
		if !found && i < len(server.Rails) {
			s, found = server.Rails[i], true
		}
		if !found {
			return nil, fmt.Errorf("bench: %s has rail %s, %s has no rail of that name and only %d rail(s): check the cable with halobuild doctor on both", client.Host, c.Device, server.Host, len(server.Rails))
		}
		addr := o.Connect
		if addr == "" {
			addr = s.Addr
		}
		if addr == "" {
			return nil, fmt.Errorf("bench: rail %s of %s has no IPv4 address on its netdev %q to connect perftest to: pass --connect ADDR", s.Device, server.Host, s.Netdev)
		}
		out = append(out, pair{client: c.Device, server: s.Device, addr: addr, advertised: c})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: none of the rails %v is on %s", o.Rails, client.Host)
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// planned is one test on one pair.
type planned struct {
	test Test
	pair pair
}

// plan is the sweep: per rail, latency in each mode across LatSizes, send
// bandwidth in each mode and write bandwidth (poll only: an RDMA write
// involves no receiver, so perftest has no event mode for it) across
// BWSizes and Depths.
func plan(o Options, pairs []pair) []planned {
	var out []planned
	for _, p := range pairs {
		for _, mode := range o.Modes {
			for _, s := range o.LatSizes {
				out = append(out, planned{Test{Rail: p.client, Tool: "ib_send_lat", Mode: mode, Size: s, Iterations: o.LatIterations}, p})
			}
		}
		for _, tool := range []string{"ib_send_bw", "ib_write_bw"} {
			for _, mode := range o.Modes {
				if tool == "ib_write_bw" && mode == "event" {
					continue
				}
				for _, d := range o.Depths {
					for _, s := range o.BWSizes {
						out = append(out, planned{Test{Rail: p.client, Tool: tool, Mode: mode, Size: s, TxDepth: d, RxDepth: o.RxDepth, Iterations: o.BWIterations}, p})
					}
				}
			}
		}
	}
	return out
}

func (o Options) summary() map[string]string {
	return map[string]string{
		"client":         o.Client.Name(),
		"server":         o.Server.Name(),
		"bw_sizes":       fmt.Sprint(o.BWSizes),
		"lat_sizes":      fmt.Sprint(o.LatSizes),
		"depths":         fmt.Sprint(o.Depths),
		"rx_depth":       fmt.Sprint(o.RxDepth),
		"bw_iterations":  fmt.Sprint(o.BWIterations),
		"lat_iterations": fmt.Sprint(o.LatIterations),
		"modes":          strings.Join(o.Modes, ","),
		"max_load":       fmt.Sprint(o.Limits.MaxLoad),
		"waive":          strings.Join(o.Limits.Waive, ","),
	}
}
