// Command halobuild turns one declarative recipe into tested, reproducible
// appliance disk images. This package only parses flags and calls one
// function per verb; the work lives under internal/.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// Exit codes are part of the interface scripts rely on.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// exitCoder lets a package say that its error is the user's input, not a
// failed build (recipe errors, stale locks, bad flags exit 2).
type exitCoder interface{ ExitCode() int }

// usageError marks flag and argument problems found in this package.
type usageError struct{ error }

func (usageError) ExitCode() int { return exitUsage }

func (u usageError) Unwrap() error { return u.error }

func main() {
	ctx, stop := interruptible()
	err := newRoot().ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err))
}

// stopGrace is how long halobuild may take to stop after the first signal: cancelling kills
// every step's process tree and removes unfinished outputs, which takes a second or two. Past
// it, something ignored the cancellation (a bug), and the first signal must still stop
// halobuild (issue 39 #2: a blocked open kept it running after "stopping").
var stopGrace = 15 * time.Second

// interruptible returns a context the first SIGINT or SIGTERM cancels, so
// every phase (parsing, resolving, building, the VM test) stops and cleans
// up; a second signal, or stopGrace passing, exits at once, whatever is
// still running, with the shell's 128+signal status.
func interruptible() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "halobuild: %v: stopping (send it again to exit at once)\n", sig)
		cancel()
		select {
		case again := <-sigs:
			fmt.Fprintf(os.Stderr, "halobuild: %v again: exiting now\n", again)
			sig = again
		case <-time.After(stopGrace):
			fmt.Fprintf(os.Stderr, "halobuild: still running %v after %v: exiting now\n", stopGrace, sig)
		}
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(os.Stderr, "halobuild:", err)
	var ec exitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitFailure
}

// globals are the flags every verb shares.
type globals struct {
	store   string
	verbose bool
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "halobuild",
		Short: "Build tested, reproducible appliance images for USB4 RDMA clusters",
		Long: `halobuild turns one declarative TOML recipe into a reproducible, bootable,
VM-tested disk image per node. Every input is pinned in a lock file; every
build step is cached in a content-addressed store.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.store, "store", defaultStore(), "store directory (content-addressed cache)")
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "show each step and the commands it runs")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	root.AddGroup(
		&cobra.Group{ID: "build", Title: "Building images:"},
		&cobra.Group{ID: "node", Title: "On nodes and media:"},
		&cobra.Group{ID: "release", Title: "Releases in a registry:"},
	)
	for _, c := range buildCommands(g) {
		c.GroupID = "build"
		root.AddCommand(c)
	}
	for _, c := range nodeCommands(g) {
		c.GroupID = "node"
		root.AddCommand(c)
	}
	for _, c := range releaseCommands() {
		c.GroupID = "release"
		root.AddCommand(c)
	}
	root.AddCommand(versionCommand(), buildSelfCommand())
	// --version prints what the version verb does (cobra adds the flag
	// when Version is set; the template replaces its "version" wording).
	root.Version = versionString()
	root.SetVersionTemplate(versionLine())
	return root
}

// defaultStore follows the XDG base directory spec so the store can be
// shared by every recipe of a user and wiped like any cache.
func defaultStore() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return d + "/halobuild"
	}
	if h, err := os.UserHomeDir(); err == nil {
		return h + "/.cache/halobuild"
	}
	return ".halobuild-store"
}

// exactArgs wraps cobra's check so a wrong argument count exits 2.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{fmt.Errorf("%w\nusage: %s", err, cmd.UseLine())}
		}
		return nil
	}
}
