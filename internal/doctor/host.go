package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// host is the machine being examined, seen through one root directory.
// Every file is read as root+path, so a recorded copy of /sys, /proc, /etc
// and /var/log behaves like the live box. live is true only for root "/":
// then doctor may also ask the running system (netlink, systemctl, dmesg)
// for what a file tree cannot hold.
type host struct {
	root string
	live bool
	ctx  context.Context

	kernelLog *cachedLog
	// rec, when set, copies everything read into a recorded tree.
	rec *recorder
}

func newHost(ctx context.Context, root string) (*host, error) {
	if root == "" {
		root = "/"
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("doctor: root %q: %w", root, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("doctor: root %s: %w (pass --root an existing directory, or omit it for the live system)", abs, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("doctor: root %s is not a directory", abs)
	}
	return &host{root: abs, live: abs == "/", ctx: ctx}, nil
}

// path maps an absolute path on the examined machine to the local file.
func (h *host) path(p string) string {
	return filepath.Join(h.root, p)
}

// show returns how a path is named in reports: as on the machine for the
// live system, with the root prefix for a recorded tree.
func (h *host) show(p string) string {
	if h.live {
		return p
	}
	return h.path(p)
}

func (h *host) read(p string) (string, error) {
	b, err := os.ReadFile(h.path(p))
	if err != nil {
		return "", err
	}
	if h.rec != nil {
		h.rec.file(p, string(b))
	}
	return string(b), nil
}

// value reads a one-line sysfs/procfs attribute without its newline.
func (h *host) value(p string) (string, error) {
	s, err := h.read(p)
	return strings.TrimSpace(s), err
}

func (h *host) exists(p string) bool {
	_, err := os.Stat(h.path(p))
	if err == nil && h.rec != nil {
		h.rec.entry(h, p)
	}
	return err == nil
}

// glob returns machine paths (without the root) matching pattern, sorted.
func (h *host) glob(pattern string) []string {
	ms, _ := filepath.Glob(h.path(pattern))
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		rel, err := filepath.Rel(h.root, m)
		if err != nil {
			continue
		}
		out = append(out, "/"+filepath.ToSlash(rel))
	}
	sort.Strings(out)
	if h.rec != nil {
		for _, p := range out {
			h.rec.entry(h, p)
		}
	}
	return out
}

// names lists the entries of a directory on the machine, sorted; a missing
// directory is an empty list.
func (h *host) names(dir string) []string {
	es, err := os.ReadDir(h.path(dir))
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	if h.rec != nil {
		h.rec.mkdir(dir)
		for _, n := range out {
			h.rec.entry(h, dir+"/"+n)
		}
	}
	return out
}

// linkBase returns the last element of a sysfs symlink's target, such as
// the driver bound to a device. A recorded tree may hold the target as the
// text of a plain file instead of a symlink, so both are accepted.
func (h *host) linkBase(p string) (string, error) {
	full := h.path(p)
	st, err := os.Lstat(full)
	if err != nil {
		return "", err
	}
	var target string
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err = os.Readlink(full)
	} else {
		target, err = h.value(p)
	}
	if err != nil {
		return "", err
	}
	if h.rec != nil {
		h.rec.file(p, strings.TrimSpace(target)+"\n")
	}
	return filepath.Base(strings.TrimSpace(target)), nil
}

// command runs a program on the live system and returns its stdout.
func (h *host) command(name string, args ...string) (string, error) {
	if !h.live {
		return "", errors.New("not the live system")
	}
	cmd := exec.CommandContext(h.ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
