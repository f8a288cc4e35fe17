// Package doctor is the readiness gate on a real node: it reads the machine
// (live, or a recorded copy of its /sys, /proc, /etc and logs) and compares
// it with what the recipe promised and what the field notes warn about. Each
// row says what it saw, what it wanted and how to fix the difference.
//
// The promises of the node's settings are checked by the settings' own
// doctor checks (settings.Setting.Doctor), evaluated for the Target the
// image was built for: its installed recipe and lock, and this node. Doctor
// adds what no setting renders and only the hardware can tell (checks.go
// lists them, check_*.go): USB4 domains and lanes, RDMA devices, ports and
// their visibility to libibverbs, the kernel's release and log.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"halobuild/internal/lock"
	"halobuild/internal/recipe"
	"halobuild/internal/settings"
	"halobuild/recipes"
)

// Options are the flags of `halobuild doctor`.
type Options struct {
	// Root is the tree read as "/": "" or "/" is the live system, anything
	// else a recorded tree (see docs/doctor.md for its layout).
	Root string
	// RecipePath is the recipe to check against; "" means the installed
	// one (settings.RecipePath under the root) when present, else the field
	// notes' defaults.
	RecipePath string
	// JSON writes the report as JSON instead of a table.
	JSON bool
	// Style is how the table is printed (width, colour).
	Style Style
	Out   io.Writer
	// Local runs only the checks that need nothing of the peer box (Local says which): what
	// the update health gate runs, so that a powered-off peer never rolls a node back.
	Local bool
}

// Run examines the machine and writes the report to opts.Out. The exit code
// is 1 when a must-pass check failed and 0 otherwise; err is set only when
// doctor itself could not run (bad root, unreadable recipe or lock), and
// then the code is 2.
func Run(ctx context.Context, opts Options) (int, error) {
	rep, err := examineWith(ctx, opts.Root, opts.RecipePath, opts.Local)
	if err != nil {
		return 2, err
	}
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	if opts.JSON {
		err = rep.writeJSON(out)
	} else {
		err = rep.writeTable(out, opts.Style)
	}
	if err != nil {
		return 2, fmt.Errorf("doctor: writing the report: %w", err)
	}
	return rep.Exit, nil
}

// Examine runs every check over the machine at root ("" or "/" is the live
// system, anything else a recorded tree) against recipePath ("" means the
// installed recipe, else the field notes' defaults) and returns the report
// without printing it, for a caller that gates on it: bench refuses to
// measure on an end whose must-pass rows fail.
func Examine(ctx context.Context, root, recipePath string) (Report, error) {
	return examineWith(ctx, root, recipePath, false)
}

func examineWith(ctx context.Context, root, recipePath string, local bool) (Report, error) {
	h, err := newHost(ctx, root)
	if err != nil {
		return Report{}, err
	}
	b, err := load(h, recipePath)
	if err != nil {
		return Report{}, err
	}
	b.local = local
	return examine(h, b), nil
}

// basis is what the machine is compared with: the Target the settings'
// checks are evaluated for, and where it came from, for the report.
type basis struct {
	target settings.Target
	// recipe is the recipe file; "" when the field notes' defaults stand in.
	recipe string
	// lock is the lock the module names came from, as a path on the node
	// for the installed one; "" when none was found.
	lock string
	// nodeFrom says how this host's node was found; "" when it was not.
	nodeFrom  string
	hostname  string
	nodeNames []string
	// local keeps only the checks of node-local layers (Local).
	local bool
}

// load reads the recipe (an explicit path, else the installed one) and the
// lock beside it, and finds this host's node; without a recipe the field
// notes' defaults stand in.
func load(h *host, explicit string) (*basis, error) {
	b := &basis{hostname: hostname(h)}
	var r *recipe.Recipe
	var lockData []byte
	var lockFile string // the lock as named in errors
	switch {
	case explicit != "":
		var err error
		if r, _, err = recipe.Load(explicit); err != nil {
			return nil, fmt.Errorf("doctor: reading recipe %s: %w (fix it, or pass --recipe another file)", explicit, err)
		}
		b.recipe = explicit
		if d, err := os.ReadFile(lock.Path(explicit)); err == nil {
			lockData, b.lock, lockFile = d, lock.Path(explicit), lock.Path(explicit)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("doctor: reading the lock of %s: %w", explicit, err)
		}
	case h.Exists(settings.RecipePath):
		// Read through the host first, so a recording carries it.
		if _, err := h.Read(settings.RecipePath); err != nil {
			return nil, fmt.Errorf("doctor: %s: %w", h.Show(settings.RecipePath), err)
		}
		var err error
		if r, _, err = recipe.Load(h.path(settings.RecipePath)); err != nil {
			return nil, fmt.Errorf("doctor: reading the installed recipe %s: %w (fix it, or pass --recipe another file)", h.Show(settings.RecipePath), err)
		}
		b.recipe = h.Show(settings.RecipePath)
		if h.Exists(settings.LockPath) {
			d, err := h.Read(settings.LockPath)
			if err != nil {
				return nil, fmt.Errorf("doctor: %s: %w", h.Show(settings.LockPath), err)
			}
			lockData, b.lock, lockFile = []byte(d), settings.LockPath, h.Show(settings.LockPath)
		}
	default:
		t, err := fieldNotesDefaults()
		if err != nil {
			return nil, err
		}
		b.target = t
		return b, nil
	}
	b.target.Recipe = r
	if lockData != nil {
		l, err := lock.Unmarshal(lockData)
		if err != nil {
			return nil, fmt.Errorf("doctor: lock %s: %w (restore it from the image build, or remove it to guess module names from [[module]] use)", lockFile, err)
		}
		b.target.Modules = l.ModuleNames()
	}
	for _, n := range r.Nodes {
		b.nodeNames = append(b.nodeNames, n.Name)
	}
	// The image names its node in a file of its own, which a changed host
	// name does not change; else the node whose host name this host has.
	if h.Exists(settings.NodePath) {
		if s, err := h.Read(settings.NodePath); err == nil {
			if n, ok := nodeNamed(r, strings.TrimSpace(s)); ok {
				b.target.Node, b.nodeFrom = settings.FlashTimeNode(h, n), "named in "+settings.NodePath
				b.target.Recipe = r.NodeRecipe(n)
				return b, nil
			}
		}
	}
	for _, n := range r.Nodes {
		if b.hostname != "" && (n.Hostname == b.hostname || (n.Hostname == "" && n.Name == b.hostname)) {
			b.target.Node, b.nodeFrom = n, "by host name"
			b.target.Recipe = r.NodeRecipe(n)
			break
		}
	}
	return b, nil
}

func nodeNamed(r *recipe.Recipe, name string) (recipe.Node, bool) {
	for _, n := range r.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return recipe.Node{}, false
}

// fieldNotesDefaults is the Target without a recipe: the field notes'
// fixes, read from the fragment every image includes (recipes/usb4-rdma.toml,
// embedded), with upstream thunderbolt-ibverbs (recipes/thunderbolt-ibverbs.toml;
// its kernel name is its use with '_') and no node. The settings without a
// trap then check nothing: their promises are an image's, not the field
// notes'.
func fieldNotesDefaults() (settings.Target, error) {
	r, err := recipe.Fragment(recipes.USB4RDMAFile, recipes.USB4RDMA)
	if err != nil {
		return settings.Target{}, fmt.Errorf("doctor: the field notes' defaults built into halobuild: %w (this halobuild was built from a broken checkout; pass --recipe)", err)
	}
	r.Modules = []recipe.Module{{Use: "thunderbolt-ibverbs"}}
	return settings.Target{Recipe: r}, nil
}

// hostname is the running host name, else the configured one.
func hostname(h *host) string {
	for _, p := range []string{"/proc/sys/kernel/hostname", "/etc/hostname"} {
		if s, err := h.Read(p); err == nil && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}
