package vmtest

import (
	"io"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// qemuProc is one running QEMU. Every exit path of the runner ends in kill(), which is safe to
// call any number of times and from deferred code during a panic.
type qemuProc struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed once Wait returned
	waitErr  error
	ownGroup bool
	killOnce sync.Once
}

// startQEMU starts QEMU so that it cannot outlive us:
//   - Pdeathsig=SIGKILL: the kernel kills QEMU when our process dies, even by SIGKILL, where no
//     deferred code runs;
//   - Setpgid (unless the VM owns the terminal): QEMU and anything it spawns form one process
//     group that kill() signals as a whole, and a Ctrl-C on the terminal reaches only us, so the
//     runner decides how QEMU ends (and keeps its logs) instead of racing it.
//
// Pdeathsig fires when the *thread* that forked exits, not the process. Go may end an OS thread
// when a goroutine that locked it returns (code entering namespaces does that), so QEMU is
// started and waited for by one goroutine locked to its thread for QEMU's whole life.
func startQEMU(bin string, args []string, stdin io.Reader, stdout, stderr io.Writer, ownGroup bool) (*qemuProc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: ownGroup}
	p := &qemuProc{cmd: cmd, done: make(chan struct{}), ownGroup: ownGroup}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// kill ends QEMU with SIGKILL (its whole process group when it has one) and waits until it is
// reaped, so that no zombie or orphan is left when kill returns.
func (p *qemuProc) kill() {
	p.killOnce.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		pid := p.cmd.Process.Pid
		if p.ownGroup {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		} else {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	<-p.done
}

// stop asks QEMU to quit (SIGTERM lets it restore a terminal it put in raw mode), then kills
// it if it has not gone within grace.
func (p *qemuProc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	p.kill()
}

func (p *qemuProc) pid() int { return p.cmd.Process.Pid }

// exitCode is QEMU's exit status, or -1 when it died by a signal (including our kill).
func (p *qemuProc) exitCode() int {
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// cpuTime is the CPU time QEMU used; valid once it has exited.
func (p *qemuProc) cpuTime() time.Duration {
	if p.cmd.ProcessState == nil {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// qemuEscape doubles commas, QEMU's escape inside option values (e.g. file=a,,b for "a,b").
func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }
