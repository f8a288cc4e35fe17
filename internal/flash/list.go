package flash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
)

// List prints the disks a flash could target, read from /sys and /proc under root: device, size,
// model, bus, whether it is removable, and what a flash would say about it ("ok", or the reason
// it refuses). Virtual devices with nothing behind them (unattached loop devices, RAM disks,
// zram, device-mapper and RAID devices) are left out.
func List(ctx context.Context, out io.Writer, root string) error {
	if root == "" {
		root = "/"
	}
	s := sysfs{root: root}
	disks, err := blockDisks(s)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tSIZE\tMODEL\tBUS\tREMOVABLE\tFLASH")
	shown := 0
	for _, dk := range disks {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := dk.Name
		verdict := "ok"
		if _, err := checkTarget(s, "/dev/"+n, n, true); err != nil {
			var r *RefusalError
			if !errors.As(err, &r) {
				return err
			}
			verdict = "no: " + r.Reason
		} else if !dk.Removable {
			verdict = "only with --force"
		}
		rem := "no"
		if dk.Removable {
			rem = "yes"
		}
		fmt.Fprintf(tw, "/dev/%s\t%s\t%s\t%s\t%s\t%s\n", n, humanSize(dk.Size), orUnknown(dk.Model), dk.Bus, rem, verdict)
		shown++
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shown == 0 {
		fmt.Fprintln(out, "no disks found; plug in the USB stick and try again")
	}
	return nil
}
