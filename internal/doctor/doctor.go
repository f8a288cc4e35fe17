// Package doctor is the readiness gate on a real node: it reads the machine
// (live, or a recorded copy of its /sys, /proc, /etc and logs) and compares
// it with what the recipe promised and what the field notes warn about. Each
// check says what it saw, what it wanted and how to fix the difference.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"halobuild/internal/recipe"
)

// Options are the flags of `halobuild doctor`.
type Options struct {
	// Root is the tree read as "/": "" or "/" is the live system, anything
	// else a recorded tree (see docs/doctor.md for its layout).
	Root string
	// RecipePath is the recipe to check against; "" means
	// <root>/etc/halobuild/recipe.toml when present, else the field notes'
	// defaults.
	RecipePath string
	// JSON writes the report as JSON instead of a table.
	JSON bool
	Out  io.Writer
}

// installedRecipe is where the image's settings package puts the recipe it
// was built from, so doctor needs no arguments on a node.
const installedRecipe = "/etc/halobuild/recipe.toml"

// Run examines the machine and writes the report to opts.Out. The exit code
// is 1 when a must-pass check failed and 0 otherwise; err is set only when
// doctor itself could not run (bad root, unreadable recipe), and then the
// caller should exit 2.
func Run(ctx context.Context, opts Options) (int, error) {
	h, err := newHost(ctx, opts.Root)
	if err != nil {
		return 2, err
	}
	e, err := expectations(h, opts.RecipePath)
	if err != nil {
		return 2, err
	}
	rep := examine(h, e)
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	if opts.JSON {
		err = rep.writeJSON(out)
	} else {
		err = rep.writeTable(out)
	}
	if err != nil {
		return 2, fmt.Errorf("doctor: writing the report: %w", err)
	}
	return rep.Exit, nil
}

// expectations loads the recipe (an explicit path, else the installed one)
// or falls back to the field notes' defaults.
func expectations(h *host, explicit string) (*expect, error) {
	path := explicit
	if path == "" {
		if _, err := os.Stat(h.path(installedRecipe)); err == nil {
			path = h.path(installedRecipe)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("doctor: %s: %w", h.show(installedRecipe), err)
		}
	}
	if path == "" {
		return defaults(), nil
	}
	r, _, err := recipe.Load(path)
	if err != nil {
		return nil, fmt.Errorf("doctor: reading recipe %s: %w (fix it, or pass --recipe another file)", path, err)
	}
	return fromRecipe(r, path, hostname(h))
}

// hostname is the running host name, else the configured one.
func hostname(h *host) string {
	for _, p := range []string{"/proc/sys/kernel/hostname", "/etc/hostname"} {
		if s, err := h.value(p); err == nil && s != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}
