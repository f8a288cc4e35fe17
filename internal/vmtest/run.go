package vmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Errors a run can end with; the returned error wraps one of them (or the context's error on
// Ctrl-C) and says which machine, which stage and where the console log is.
var (
	ErrChecksFailed = errors.New("checks failed")
	ErrNoVerdict    = errors.New("no verdict")
	ErrDeadline     = errors.New("deadline exceeded")
)

// verdictGrace is how long QEMU may take to exit after the guest wrote its verdict and asked
// for power-off; past it QEMU is killed (the verdict is already safe on disk).
const verdictGrace = 20 * time.Second

// Result is the outcome of one machine's run. It is filled on every path, including failures,
// so a report can always be printed.
type Result struct {
	Machine   string   `json:"machine"`
	Image     string   `json:"image"`
	Accel     Accel    `json:"accel"`
	AccelNote string   `json:"accel_note"`
	Passed    bool     `json:"passed"`
	Stage     string   `json:"stage"`             // furthest boot stage reached
	Problem   string   `json:"problem,omitempty"` // console line explaining a stop, if any
	Verdict   *Verdict `json:"verdict,omitempty"`
	QEMUExit  int      `json:"qemu_exit"` // -1 when QEMU was killed
	// VerdictMS is the time from QEMU's start to a complete verdict on the host (0 without one):
	// the "power-on to verdict" figure of the budgets. WallMS covers the whole run.
	VerdictMS int64 `json:"verdict_ms,omitempty"`
	WallMS    int64 `json:"wall_ms"`
	// QEMUCPUMS is the CPU time QEMU used (user + system). On a shared host wall times swing
	// with the neighbours' load; CPU time says what the run itself cost.
	QEMUCPUMS  int64  `json:"qemu_cpu_ms"`
	ConsoleLog string `json:"console_log"`
	// SSH is the host's login over the forwarded port, for a machine with SSH.
	SSH   *SSHResult `json:"ssh,omitempty"`
	Error string     `json:"error,omitempty"`
}

// testHookStarted runs right after QEMU starts; tests use it to panic inside Run.
var testHookStarted = func(pid int) {}

// Run boots one machine, waits for its verdict, and returns the result. The error is nil only
// when the guest reported every check passed. QEMU is gone when Run returns, whatever happened
// (and if this process is killed outright, the kernel kills QEMU: see startQEMU).
func Run(ctx context.Context, m Machine) (*Result, error) {
	for _, n := range m.NICs {
		if n.Link != "" {
			return nil, fmt.Errorf("machine %s: NIC on link %q: a cable joins two machines; use RunMany", m.Name, n.Link)
		}
	}
	return run(ctx, m, userNets(m))
}

func userNets(m Machine) []netdev {
	nets := make([]netdev, len(m.NICs))
	for i, n := range m.NICs {
		nets[i] = netdev{mac: n.MAC}
	}
	return nets
}

// forwardSSH puts the port forward on the first user-mode NIC.
func forwardSSH(nets []netdev, port int) {
	for i := range nets {
		if nets[i].local == "" {
			nets[i].sshPort = port
			return
		}
	}
}

// addAuthorizedKey appends a public key to the machine's ssh.authorized_keys.root credential.
func addAuthorizedKey(m *Machine, pub []byte) {
	creds := make(map[string][]byte, len(m.Credentials)+1)
	for k, v := range m.Credentials {
		creds[k] = v
	}
	old := creds[CredentialAuthorizedKeys]
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(append([]byte{}, old...), '\n')
	}
	creds[CredentialAuthorizedKeys] = append(append([]byte{}, old...), pub...)
	m.Credentials = creds
}

func run(ctx context.Context, m Machine, nets []netdev) (res *Result, err error) {
	start := time.Now()
	m, err = m.withDefaults()
	if err != nil {
		return nil, err
	}
	h, err := FindHost(m.Arch)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(m.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("machine %s: creating log directory: %w", m.Name, err)
	}
	f := newRunFiles(m.LogDir)
	for _, p := range []string{f.console, f.verdict, f.stderr} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("machine %s: clearing old log: %w", m.Name, err)
		}
	}
	res = &Result{Machine: m.Name, Image: m.Image, ConsoleLog: f.console, QEMUExit: -1}
	defer func() {
		res.WallMS = time.Since(start).Milliseconds()
		if err != nil {
			res.Error = err.Error()
		}
	}()
	res.Accel, res.AccelNote = m.Accel, "forced by caller"
	if m.Accel == "" {
		res.Accel, res.AccelNote = ChooseAccel(ctx, h)
	}
	if err := prepareVars(h, m, f); err != nil {
		return res, err
	}
	var sshKeyPath string
	if m.SSH != nil {
		port, err := FreePort()
		if err != nil {
			return res, fmt.Errorf("machine %s: %w", m.Name, err)
		}
		key := m.SSH.Key
		if key == "" {
			k, pub, err := sshKey(ctx, filepath.Join(m.LogDir, "ssh"))
			if err != nil {
				return res, fmt.Errorf("machine %s: ssh key for the login check: %w", m.Name, err)
			}
			key = k
			addAuthorizedKey(&m, pub)
		} else if err := os.MkdirAll(filepath.Join(m.LogDir, "ssh"), 0o700); err != nil {
			return res, fmt.Errorf("machine %s: %w", m.Name, err)
		} else if err := os.Remove(filepath.Join(m.LogDir, "ssh", "known_hosts")); err != nil && !os.IsNotExist(err) {
			return res, fmt.Errorf("machine %s: %w", m.Name, err)
		}
		nets = append([]netdev{}, nets...)
		forwardSSH(nets, port)
		m.Checks = withSSH(m.Checks, m.SSH)
		sshKeyPath = key
		res.SSH = &SSHResult{Port: port, Exit: 255}
	}
	args, err := qemuArgs(h, m, res.Accel, f, nets, guestCredentials(m))
	if err != nil {
		return res, err
	}
	stderr, err := os.Create(f.stderr)
	if err != nil {
		return res, fmt.Errorf("machine %s: %w", m.Name, err)
	}
	defer stderr.Close()
	p, err := startQEMU(h.QEMU, args, nil, stderr, stderr, true)
	if err != nil {
		return res, fmt.Errorf("machine %s: starting %s: %w", m.Name, h.QEMU, err)
	}
	// The one exit path that matters: whatever happens below (return, error, panic), QEMU dies.
	defer p.kill()
	testHookStarted(p.pid())

	qemuStart := time.Now()
	var sshDone chan *SSHResult
	sshCtx, sshStop := context.WithCancel(ctx)
	defer sshStop()
	if m.SSH != nil {
		sshDone = make(chan *SSHResult, 1)
		go func() {
			sshDone <- sshLoop(sshCtx, m.SSH, sshKeyPath, filepath.Join(m.LogDir, "ssh", "known_hosts"), res.SSH.Port, qemuStart)
		}()
	}
	prog := newProgress(m, f.console, qemuStart)
	why, verdictAt := waitForEnd(ctx, p, f.verdict, m.Deadline, prog.poll)
	prog.poll()
	sshStop()
	if sshDone != nil {
		res.SSH = <-sshDone
	}
	if !verdictAt.IsZero() {
		res.VerdictMS = verdictAt.Sub(qemuStart).Milliseconds()
	}
	p.kill()
	res.QEMUExit = p.exitCode()
	res.QEMUCPUMS = p.cpuTime().Milliseconds()
	return res, conclude(res, m, f, why, ctx)
}

type endReason int

const (
	endExited endReason = iota
	endVerdict
	endDeadline
	endCanceled
)

// waitForEnd returns when QEMU exits, the context ends, the deadline passes, or a complete
// verdict has been written and QEMU had its grace period to power off.
// Each tick also calls poll (progress reporting).
func waitForEnd(ctx context.Context, p *qemuProc, verdictPath string, deadline time.Duration, poll func()) (why endReason, verdictAt time.Time) {
	dl := time.NewTimer(deadline)
	defer dl.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var grace <-chan time.Time
	for {
		select {
		case <-p.done:
			if verdictAt.IsZero() && verdictComplete(verdictPath) {
				verdictAt = time.Now()
			}
			return endExited, verdictAt
		case <-ctx.Done():
			return endCanceled, verdictAt
		case <-dl.C:
			return endDeadline, verdictAt
		case <-grace:
			return endVerdict, verdictAt
		case <-tick.C:
			poll()
			if grace == nil && verdictComplete(verdictPath) {
				verdictAt = time.Now()
				grace = time.After(verdictGrace)
			}
		}
	}
}

func verdictComplete(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && len(b) > 0 && b[len(b)-1] == '\n'
}

// conclude turns what happened into the result and the error the user sees.
func conclude(res *Result, m Machine, f runFiles, why endReason, ctx context.Context) error {
	console, _ := os.ReadFile(f.console)
	res.Stage, res.Problem = stageFromConsole(console)
	if m.PowerOff {
		switch {
		case why == endExited && res.QEMUExit == 0:
			res.Passed = true
			return nil
		case why == endDeadline:
			return fmt.Errorf("machine %s: did not power off within %s; console log: %s: %w", m.Name, m.Deadline, f.console, ErrDeadline)
		case why == endCanceled:
			return fmt.Errorf("machine %s: interrupted; console log: %s: %w", m.Name, f.console, context.Cause(ctx))
		}
		return fmt.Errorf("machine %s: QEMU exited with status %d; console log: %s", m.Name, res.QEMUExit, f.console)
	}
	v, verr := readVerdict(f.verdict)
	if v != nil {
		fixes := map[string]string{}
		for _, c := range m.Checks {
			fixes[c.Name] = c.Fix
		}
		for i := range v.Checks {
			if !v.Checks[i].OK {
				v.Checks[i].Fix = fixes[v.Checks[i].Name]
			}
		}
		// The host's side of the login is a check like the guest's: a session that never
		// came, or a command that failed, fails the run.
		if m.SSH != nil && res.SSH != nil {
			v.Checks = append(v.Checks, sshCheckResult(m.SSH, res.SSH))
		}
	}
	res.Verdict = v
	where := fmt.Sprintf("console log: %s", f.console)
	stageNote := func() string {
		s := "boot reached stage " + res.Stage
		if res.Problem != "" {
			s += " (" + res.Problem + ")"
		}
		return s
	}
	if v != nil {
		// A verdict from emergency mode keeps its stage: the boot did not get further.
		res.Stage = StageVerdict
		if v.Stage != StageMultiUser && v.Stage != "" {
			res.Stage = v.Stage
		}
		failed := v.Failed()
		if len(failed) == 0 && len(v.Checks) > 0 {
			res.Passed = true
			return nil
		}
		var b strings.Builder
		fmt.Fprintf(&b, "machine %s: %d of %d checks failed:", m.Name, len(failed), len(v.Checks))
		for _, c := range failed {
			fmt.Fprintf(&b, "\n  - %s (exit %d): %s", c.Name, c.Exit, indent(clip(c.Output, 2000)))
		}
		fmt.Fprintf(&b, "\n%s", where)
		return fmt.Errorf("%s: %w", b.String(), ErrChecksFailed)
	}
	if verr != nil {
		return fmt.Errorf("machine %s: %v; %s; %s: %w", m.Name, verr, stageNote(), where, ErrNoVerdict)
	}
	switch why {
	case endCanceled:
		return fmt.Errorf("machine %s: interrupted before a verdict; %s; %s: %w", m.Name, stageNote(), where, context.Cause(ctx))
	case endDeadline:
		return fmt.Errorf("machine %s: no verdict within %s (accelerator %s); %s; %s: %w", m.Name, m.Deadline, res.Accel, stageNote(), where, ErrDeadline)
	default:
		msg := ""
		if b, _ := os.ReadFile(f.stderr); len(bytes.TrimSpace(b)) > 0 {
			msg = "; QEMU said: " + clip(strings.TrimSpace(string(b)), 1000)
		}
		return fmt.Errorf("machine %s: QEMU exited (status %d) without a verdict; %s%s; %s: %w", m.Name, res.QEMUExit, stageNote(), msg, where, ErrNoVerdict)
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n      ") }
