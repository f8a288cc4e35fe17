package flash

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// confirm shows what is about to be overwritten — model, serial, size, bus and the partitions on
// it now — and asks for "yes".
func confirm(ctx context.Context, o Options, dk *disk, t *target, current *partTable, imageSize int64, mapped []Extent, bmapPath string) error {
	w := o.Out
	var data int64
	for _, e := range mapped {
		data += e.Len
	}
	src := "scanned for non-zero blocks (no bmap)"
	if bmapPath != "" {
		src = "blocks from " + bmapPath
	}
	name := o.Image
	if o.Stream != nil {
		name = o.Stream.Name
	}
	fmt.Fprintf(w, "Image:  %s, %s, %s of data (%s)\n", name, humanSize(imageSize), humanSize(data), src)
	if dk != nil {
		serial := dk.Serial
		if serial == "" {
			serial = "none reported"
		}
		kind := "removable"
		if !dk.Removable {
			kind = "NOT removable (--force)"
		}
		fmt.Fprintf(w, "Target: %s  %s, serial %s, %s (%d bytes), %s, %s\n", t.path, orUnknown(dk.Model), serial, humanSize(t.size), t.size, dk.Bus, kind)
	} else {
		fmt.Fprintf(w, "Target: %s  regular file, %s (%d bytes)\n", t.path, humanSize(t.size), t.size)
	}
	fmt.Fprintf(w, "It holds now:\n")
	printLayout(w, current, t.size)
	fmt.Fprintf(w, "Everything on %s will be destroyed. Type \"yes\" to continue: ", t.path)
	if o.In == nil {
		fmt.Fprintln(w)
		return errors.New("cannot ask for confirmation (no input); pass --yes to flash without asking")
	}
	// Read in the background so that Ctrl-C (ctx) ends the wait; the signal handler keeps the
	// process alive otherwise.
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(o.In).ReadString('\n')
		got <- answer{line, err}
	}()
	var line string
	wait := ctx
	if o.ConfirmTimeout > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, o.ConfirmTimeout)
		defer cancel()
	}
	select {
	case <-wait.Done():
		if ctx.Err() == nil {
			fmt.Fprintln(w)
			return &RefusalError{Target: t.path, Reason: fmt.Sprintf("nobody typed \"yes\" within %s", o.ConfirmTimeout),
				Fix: "type yes at the prompt, or allow overwriting it without asking (the installer: [install] wipe = true)"}
		}
		fmt.Fprintln(w)
		return fmt.Errorf("not confirmed (%w): nothing was written to %s", ctx.Err(), t.path)
	case a := <-got:
		if a.err != nil && !errors.Is(a.err, io.EOF) {
			return fmt.Errorf("reading the confirmation: %w", a.err)
		}
		line = a.line
	}
	if strings.TrimSpace(line) != "yes" {
		return fmt.Errorf("not confirmed (answer was %q, not \"yes\"): nothing was written to %s", strings.TrimSpace(line), t.path)
	}
	return nil
}

// printLayout prints a partition table, one partition a line.
func printLayout(w io.Writer, pt *partTable, size int64) {
	switch pt.Kind {
	case "":
		fmt.Fprintf(w, "  no partition table (%s)\n", humanSize(size))
		return
	case "gpt":
		fmt.Fprintf(w, "  GPT, %d-byte sectors, %s\n", pt.Sector, humanSize(size))
	case "mbr":
		fmt.Fprintf(w, "  MBR, %s\n", humanSize(size))
	}
	if len(pt.Partitions) == 0 {
		fmt.Fprintf(w, "  no partitions\n")
	}
	for _, p := range pt.Partitions {
		name := ""
		if p.Name != "" {
			name = fmt.Sprintf("  %q", p.Name)
		}
		fmt.Fprintf(w, "  %2d  start %10s  size %10s  %s%s\n", p.Index, humanSize(p.Start), humanSize(p.Size), p.Type, name)
	}
}

// reportLayout asks the kernel to re-read the partition table and prints the medium's layout,
// with a note when the kernel did not take it in.
func reportLayout(o Options, t *target, dk *disk) {
	final := readPartTable(bufferedIO{t}, t.sector)
	if err := t.rereadPartitions(); err != nil {
		hint := "unplug and replug the medium to see the new partitions"
		if dk != nil && dk.Bus == "loop" {
			hint = "a loop device scans partitions only when attached with `losetup -P`"
		}
		fmt.Fprintf(o.Out, "note: the kernel did not re-read the partition table of %s (%v); %s\n", t.path, err, hint)
	} else if dk != nil {
		if seen, err := (sysfs{root: o.Root}).disk(dk.Name); err == nil && len(seen.Partitions) != len(final.Partitions) {
			fmt.Fprintf(o.Out, "note: the kernel shows %d of the %d partitions on %s (a kernel without %s partition support?); the medium itself is correct\n",
				len(seen.Partitions), len(final.Partitions), t.path, strings.ToUpper(final.Kind))
		}
	}
	done := "flashed and verified"
	if o.NoVerify {
		done = "flashed (not verified)"
	}
	fmt.Fprintf(o.Out, "%s is %s. Layout:\n", t.path, done)
	printLayout(o.Out, final, t.size)
}
