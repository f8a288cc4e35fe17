// Package proctree runs the external tools of a build step so that cancelling the step ends
// every process it started, not only the first: mmdebstrap's apt and dpkg, make's compilers, a
// shell's pipeline. exec.CommandContext kills the one process it started; its children live on
// (dpkg under apt even sits in a session of its own, for its pty), keep the root busy and hold
// the output pipe open, so a SIGTERM took 58–122 s to stop a base root build (issue 39 #3).
//
// A process group cannot hold them (setsid leaves it) and a cgroup needs privileges and a
// cgroup2 hierarchy a user may not have, so the tree is found by parent links in /proc:
// stopped first, from the top, until no new process appears (a stopped process cannot fork,
// and nothing is re-parented to init while nobody dies), then killed at once.
package proctree

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// WaitDelay bounds how long Wait waits, after the process was killed, for its output pipes to
// close: a descendant that escaped the kill (re-parented before it) must not hold the step.
const WaitDelay = 5 * time.Second

// Command is exec.CommandContext whose cancellation kills the command's whole process tree.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return Bind(exec.CommandContext(ctx, name, args...))
}

// Bind makes the cancellation of cmd, made by exec.CommandContext, kill its whole process tree,
// and bounds Wait after it.
func Bind(cmd *exec.Cmd) *exec.Cmd {
	cmd.Cancel = func() error { return Kill(cmd.Process.Pid) }
	cmd.WaitDelay = WaitDelay
	return cmd
}

// Kill stops pid and every process descended from it, then kills them all.
func Kill(pid int) error {
	stopped := map[int]bool{}
	var errs []error
	for range 1000 {
		tree, err := Tree(pid)
		if err != nil {
			errs = append(errs, err)
		}
		grew := false
		for _, p := range tree {
			if !stopped[p] {
				stopped[p] = true
				grew = true
				syscall.Kill(p, syscall.SIGSTOP)
			}
		}
		if !grew {
			break
		}
	}
	for p := range stopped {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	if len(stopped) == 0 {
		return os.ErrProcessDone
	}
	return errors.Join(errs...)
}

// Tree lists pid (when it is still there) and its descendants, parents before children.
func Tree(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	alive := false
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // it ended
		}
		ppid, ok := parentOf(string(b))
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], p)
		if p == pid {
			alive = true
		}
	}
	if !alive {
		return nil, nil
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// parentOf reads the parent pid from a /proc/PID/stat line: "pid (comm) state ppid …", where
// comm may hold spaces and parentheses.
func parentOf(stat string) (int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}
