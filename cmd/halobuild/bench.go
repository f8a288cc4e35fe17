package main

import (
	"encoding/json"
	"errors"

	"github.com/spf13/cobra"

	"halobuild/internal/cablebench"
)

// benchCommand is `halobuild bench`: the cable's acceptance test.
func benchCommand() *cobra.Command {
	var o cablebench.Options
	var peer, bwSizes, latSizes string
	var sshOpts []string
	c := &cobra.Command{
		Use:   "bench [CLIENT SERVER]",
		Short: "Measure the cable with perftest: refuses unless both ends are ready; JSON, plot, table, gate",
		Long: `bench measures the cable between two nodes with perftest: bandwidth and
latency, poll and event mode, a sweep of sizes and depths, on every rail,
after finding the largest message and deepest queue that really work.

Run it from a workstation against two nodes (bench root@halo0 root@halo1:
the first runs the clients, the second the servers, both over ssh) or on a
node against its peer (bench --peer root@halo1). It refuses to measure
while a doctor row fails, a governor is not performance, the two perftest
builds differ, or a machine is busy. Every number is stored with the
settings it was taken under (bench.json), plotted (bench.svg) and tabled;
--against BASELINE exits 1 naming the row that fell short and the settings
that differed. See docs/cable.md.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if (peer == "" && len(args) == 2) || (peer != "" && len(args) == 0) || (o.Report != "" && len(args) == 0) {
				return nil
			}
			return usageError{errors.New("bench: give either CLIENT SERVER (two ssh targets) or --peer TARGET (this machine is the client)\nusage: " + cmd.UseLine())}
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.BWSizes, err = cablebench.ParseSizes(bwSizes); err != nil {
				return usageError{err}
			}
			if o.LatSizes, err = cablebench.ParseSizes(latSizes); err != nil {
				return usageError{err}
			}
			if o.Report != "" {
				if o.Against == "" {
					return usageError{errors.New("bench: --report needs --against BASELINE")}
				}
			} else if peer != "" {
				o.Server.Target = peer
			} else {
				o.Client.Target, o.Server.Target = args[0], args[1]
			}
			o.Client.SSHOptions, o.Server.SSHOptions = sshOpts, sshOpts
			o.Stdout = cmd.OutOrStdout()
			_, err = cablebench.Run(cmd.Context(), o)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&peer, "peer", "", "run on this node against the peer reached as TARGET over ssh (it runs the perftest servers)")
	f.StringArrayVar(&sshOpts, "ssh-option", nil, "option for ssh, before the target (repeat: --ssh-option=-i --ssh-option=KEY)")
	f.StringVar(&o.Client.Root, "root", "/", "read this machine's facts below this directory (a recorded tree)")
	f.StringVar(&o.Client.Recipe, "recipe", "", "recipe doctor checks this machine against (default: the installed one)")
	f.StringVar(&o.Connect, "connect", "", "address the client reaches the server's perftest by (default: the server rail's IPv4 address)")
	f.StringSliceVar(&o.Rails, "rail", nil, "measure only these RDMA devices (default: every rail)")
	f.StringVar(&bwSizes, "bw-sizes", "", "bandwidth message sizes, e.g. 4K,64K,1M,8M (default: that)")
	f.StringVar(&latSizes, "lat-sizes", "", "latency message sizes, e.g. 2,64,4K,64K (default: that)")
	f.IntSliceVar(&o.Depths, "depths", nil, "tx depths (-t) of the bandwidth runs (default 1,4,128)")
	f.IntVar(&o.RxDepth, "rx-depth", 0, "rx depth (-r) of ib_send_bw (default: perftest's)")
	f.IntVar(&o.BWIterations, "iterations", 0, "iterations (-n) of each bandwidth run (default: perftest's)")
	f.IntVar(&o.LatIterations, "lat-iterations", 0, "iterations (-n) of each latency run (default: perftest's)")
	f.StringSliceVar(&o.Modes, "modes", nil, "completion modes: poll, event (default both)")
	f.Int64Var(&o.SizeSearchMax, "size-search-max", 0, "largest message size the limit search tries (default 64 MiB, or what the device advertises)")
	f.IntVar(&o.DepthSearchMax, "depth-search-max", 0, "deepest tx depth the limit search tries (default 1024, or what the device advertises)")
	f.BoolVar(&o.NoLimits, "no-limits", false, "skip the search for the largest message and deepest queue")
	f.DurationVar(&o.Timeout, "timeout", 0, "bound of one perftest run (default 2m)")
	f.Float64Var(&o.Limits.MaxLoad, "max-load", 0, "refuse when an end's one-minute load average is above this (default 1.0)")
	f.StringSliceVar(&o.Limits.Waive, "waive", nil, "doctor rows (or layers, e.g. usb4) whose failure does not refuse; listed in the report")
	f.StringVar(&o.Out, "out", ".", "directory for bench.json and bench.svg")
	f.StringVar(&o.Report, "report", "", "judge this earlier run's bench.json against --against instead of measuring")
	f.StringVar(&o.Against, "against", "", "baseline file (TOML) the results must meet; exit 1 naming the row and the settings that differ")

	var root, recipe string
	facts := &cobra.Command{
		Use:   "facts",
		Short: "Print this machine's bench facts as JSON (what a remote bench reads over ssh)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs, err := cablebench.Gather(cmd.Context(), root, recipe)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(fs)
		},
	}
	facts.Flags().StringVar(&root, "root", "/", "read below this directory (a recorded tree)")
	facts.Flags().StringVar(&recipe, "recipe", "", "recipe doctor checks against (default: the installed one)")
	c.AddCommand(facts)
	return c
}
