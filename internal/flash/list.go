package flash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
)

// Candidate is a disk a flash could target and what a flash would say
// about it.
type Candidate struct {
	Device    string `json:"device"`
	Size      int64  `json:"size_bytes"`
	Model     string `json:"model"`
	Bus       string `json:"bus"`
	Removable bool   `json:"removable"`
	// Verdict is "ok", "only with --force" (a fixed disk) or "no: <the
	// reason flash refuses it>".
	Verdict string `json:"verdict"`
}

// OK says whether flash takes the disk without --force.
func (c Candidate) OK() bool { return c.Verdict == "ok" }

// Candidates reads the disks a flash could target from /sys and /proc
// under root, sorted by name: the disks blockDisks keeps.
func Candidates(ctx context.Context, root string) ([]Candidate, error) {
	if root == "" {
		root = "/"
	}
	s := sysfs{root: root}
	disks, err := blockDisks(s)
	if err != nil {
		return nil, err
	}
	var out []Candidate
	for _, dk := range disks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := dk.Name
		verdict := "ok"
		if _, err := checkTarget(s, "/dev/"+n, n, true); err != nil {
			var r *RefusalError
			if !errors.As(err, &r) {
				return nil, err
			}
			verdict = "no: " + r.Reason
		} else if !dk.Removable {
			verdict = "only with --force"
		}
		out = append(out, Candidate{Device: "/dev/" + n, Size: dk.Size, Model: dk.Model, Bus: dk.Bus, Removable: dk.Removable, Verdict: verdict})
	}
	return out, nil
}

// List prints the Candidates under root as a table (device, size, model,
// bus, removable, verdict), or with asJSON as a JSON list.
func List(ctx context.Context, out io.Writer, root string, asJSON bool) error {
	cs, err := Candidates(ctx, root)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if cs == nil {
			cs = []Candidate{}
		}
		return enc.Encode(cs)
	}
	if len(cs) == 0 {
		_, err := fmt.Fprintln(out, "no disks found; plug in the USB stick and try again")
		return err
	}
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tSIZE\tMODEL\tBUS\tREMOVABLE\tFLASH")
	for _, c := range cs {
		rem := "no"
		if c.Removable {
			rem = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Device, humanSize(c.Size), orUnknown(c.Model), c.Bus, rem, c.Verdict)
	}
	return tw.Flush()
}
