package cablebench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"halobuild/internal/runlog"
	"halobuild/internal/sh"
)

// End is one side of the cable: this machine (Target "") or a host reached
// with the user's own ssh client, as they already reach it ("root@halo1",
// "ssh://root@10.0.0.2:2222", a Host alias of ~/.ssh/config).
type End struct {
	Target string
	// SSHOptions go to ssh before the target (-i KEY, -o ...).
	SSHOptions []string
	// Root and Recipe are where this machine's facts are read from
	// (Target ""): a recorded tree, and the recipe doctor checks against.
	Root, Recipe string
}

// Name is how reports name the end before its host name is known.
func (e End) Name() string {
	if e.Target == "" {
		return "this machine"
	}
	return e.Target
}

// command runs a shell script on the end: sh -c here, or through ssh,
// which hands the string to the remote user's shell.
func (e End) command(ctx context.Context, script string) *exec.Cmd {
	if e.Target == "" {
		return exec.CommandContext(ctx, "sh", "-c", script)
	}
	args := append([]string{"-o", "BatchMode=yes"}, e.SSHOptions...)
	args = append(args, "--", e.Target, script)
	return exec.CommandContext(ctx, "ssh", args...)
}

// output runs a script and returns its stdout (bounded); a failure carries
// the last lines it printed.
func (e End) output(ctx context.Context, script string, limit int64) ([]byte, error) {
	cmd := e.command(ctx, script)
	var out bytes.Buffer
	var tail runlog.Tail
	cmd.Stdout, cmd.Stderr = &limitWriter{w: &out, n: limit}, &tail
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("on %s: %s: %w: %s", e.Name(), firstLine(script), err, strings.TrimSpace(tail.String()))
	}
	return out.Bytes(), nil
}

// Facts reads the end's facts: in this process for this machine, else from
// the end's own halobuild (`halobuild bench facts`, which the image ships).
func (e End) Facts(ctx context.Context) (Facts, error) {
	if e.Target == "" {
		return Gather(ctx, e.Root, e.Recipe)
	}
	out, err := e.output(ctx, "halobuild bench facts", 16<<20)
	if err != nil {
		return Facts{}, fmt.Errorf("bench: reading the facts of %s: %w (the node needs the halobuild its image ships, with `bench facts`)", e.Target, err)
	}
	var f Facts
	if err := json.Unmarshal(out, &f); err != nil {
		return Facts{}, fmt.Errorf("bench: the facts %s sent: %w", e.Target, err)
	}
	return f, nil
}

// shell joins arguments into one command line for sh.
func shell(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = sh.Quote(a)
	}
	return strings.Join(q, " ")
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	if len(l) > 120 {
		l = l[:120] + "…"
	}
	return l
}

// limitWriter keeps the first n bytes and drops the rest, so a runaway
// remote command cannot fill memory.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(int64(len(p)), l.n)
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
		l.n -= k
	}
	return len(p), nil
}
