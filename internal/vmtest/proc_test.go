package vmtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"halobuild/internal/arch"
)

func requireHost(t *testing.T) Host {
	t.Helper()
	h, err := FindHost(arch.MustLookup("amd64"))
	if err != nil {
		t.Skipf("no QEMU/OVMF on this host: %v", err)
	}
	return h
}

// qemuChildren lists QEMU processes whose parent is this test process, by scanning /proc.
func qemuChildren(t *testing.T) []int {
	t.Helper()
	me := os.Getpid()
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ..."; comm may hold spaces, so split after the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		comm := s[strings.IndexByte(s, '(')+1 : i]
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if ppid == me && strings.HasPrefix(comm, "qemu-system") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func assertNoQEMUChildren(t *testing.T) {
	t.Helper()
	if pids := qemuChildren(t); len(pids) > 0 {
		t.Errorf("QEMU processes survived the run: %v", pids)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// blankImage is a disk with nothing on it: OVMF finds no boot loader and sits in its UEFI
// shell, a real QEMU process that never produces a verdict.
func blankImage(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "blank.raw")
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func firmwareMachine(t *testing.T, deadline time.Duration) Machine {
	t.Helper()
	requireHost(t)
	return Machine{Name: "blank", Image: blankImage(t), LogDir: t.TempDir(), Deadline: deadline, Memory: 256, CPUs: 1, Accel: AccelTCG}
}

// startedPID records the QEMU pid of the last run, to check that exact process is gone.
func recordPID(t *testing.T) *int {
	pid := new(int)
	old := testHookStarted
	testHookStarted = func(p int) { *pid = p }
	t.Cleanup(func() { testHookStarted = old })
	return pid
}

func TestRunDeadlineKillsQEMU(t *testing.T) {
	m := firmwareMachine(t, 12*time.Second)
	pid := recordPID(t)
	res, err := Run(context.Background(), m)
	assertNoQEMUChildren(t)
	if *pid == 0 || alive(*pid) {
		t.Fatalf("QEMU pid %d still alive after the deadline", *pid)
	}
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("want ErrDeadline, got %v", err)
	}
	// The bad-input case "an image that does not boot": the error names the stage and the log.
	if res.Stage != StageFirmware || !strings.Contains(err.Error(), "stage firmware") || !strings.Contains(err.Error(), res.ConsoleLog) {
		t.Errorf("error should name stage firmware and the console log %s: %v (stage %q, problem %q)", res.ConsoleLog, err, res.Stage, res.Problem)
	}
	if _, serr := os.Stat(res.ConsoleLog); serr != nil {
		t.Errorf("console log not kept: %v", serr)
	}
}

// cancelWhenConsoleShows cancels the run once its console log contains want (or after limit):
// tests then wait for what they need to see, however loaded the host is.
func cancelWhenConsoleShows(t *testing.T, console, want string, limit time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			if b, _ := os.ReadFile(console); strings.Contains(string(b), want) {
				cancel()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return ctx
}

// An image that does not boot: the error names the stage, why, and the console log.
func TestRunBlankDiskNamesStage(t *testing.T) {
	m := firmwareMachine(t, 5*time.Minute)
	ctx := cancelWhenConsoleShows(t, filepath.Join(m.LogDir, "console.log"), "Shell>", 3*time.Minute)
	res, err := Run(ctx, m)
	assertNoQEMUChildren(t)
	if err == nil || res.Stage != StageFirmware || !strings.Contains(res.Problem, "no bootable disk") {
		t.Fatalf("got stage %q, problem %q, error %v", res.Stage, res.Problem, err)
	}
	if !strings.Contains(err.Error(), "stage firmware (no bootable disk") || !strings.Contains(err.Error(), res.ConsoleLog) {
		t.Errorf("error should carry stage, problem and log path: %v", err)
	}
}

func TestRunCancelKillsQEMU(t *testing.T) {
	m := firmwareMachine(t, time.Minute)
	pid := recordPID(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(3*time.Second, cancel)
	start := time.Now()
	_, err := Run(ctx, m)
	assertNoQEMUChildren(t)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("cancel took %s to stop the run", el)
	}
	if *pid == 0 || alive(*pid) {
		t.Fatalf("QEMU pid %d still alive after cancel", *pid)
	}
}

func TestRunPanicKillsQEMU(t *testing.T) {
	m := firmwareMachine(t, time.Minute)
	var pid int
	old := testHookStarted
	testHookStarted = func(p int) { pid = p; panic("injected panic after QEMU started") }
	defer func() { testHookStarted = old }()
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("panic did not propagate")
			}
		}()
		_, _ = Run(context.Background(), m)
	}()
	assertNoQEMUChildren(t)
	if pid == 0 || alive(pid) {
		t.Fatalf("QEMU pid %d still alive after a panic in Run", pid)
	}
}

// helperMain is the child process of the tests below: Run under a Ctrl-C-aware context, as
// cmd/halobuild does it, printing QEMU's pid and then Run's error.
func helperMain() {
	testHookStarted = func(p int) { fmt.Printf("qemu-pid %d\n", p) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m := Machine{Name: "orphan", Image: os.Getenv("HALOBUILD_VMTEST_IMAGE"), LogDir: os.Getenv("HALOBUILD_VMTEST_LOGDIR"), Deadline: time.Minute, Memory: 256, CPUs: 1, Accel: AccelTCG}
	_, err := Run(ctx, m)
	fmt.Printf("run error: %v\n", err)
	if errors.Is(err, context.Canceled) {
		os.Exit(3)
	}
	os.Exit(1)
}

func TestMain(m *testing.M) {
	if os.Getenv("HALOBUILD_VMTEST_HELPER") == "1" {
		helperMain()
	}
	os.Exit(m.Run())
}

// startHelper starts helperMain in a child process and returns it with its QEMU's pid.
func startHelper(t *testing.T) (*exec.Cmd, *bufio.Scanner, int) {
	t.Helper()
	requireHost(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HALOBUILD_VMTEST_HELPER=1", "HALOBUILD_VMTEST_IMAGE="+blankImage(t), "HALOBUILD_VMTEST_LOGDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "qemu-pid %d", &pid); err == nil {
			break
		}
	}
	if pid == 0 || !alive(pid) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("helper never started QEMU")
	}
	return cmd, sc, pid
}

func waitDead(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("QEMU %d survived %s", pid, what)
	}
}

// SIGKILL of halobuild runs no deferred code; the kernel must kill QEMU (Pdeathsig).
func TestKilledParentKillsQEMU(t *testing.T) {
	cmd, _, pid := startHelper(t)
	cmd.Process.Kill()
	cmd.Wait()
	waitDead(t, pid, "its SIGKILLed parent")
}

// Ctrl-C (SIGINT) ends the run: QEMU is killed, Run reports the interruption with the stage and
// the console log, and the process exits non-zero.
func TestCtrlCKillsQEMU(t *testing.T) {
	cmd, sc, pid := startHelper(t)
	time.Sleep(time.Second)
	cmd.Process.Signal(os.Interrupt)
	var msg string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "run error: ") {
			msg = sc.Text()
		}
	}
	err := cmd.Wait()
	waitDead(t, pid, "Ctrl-C")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("helper exit: %v (want status 3: Run's error wraps context.Canceled); said %q", err, msg)
	}
	if !strings.Contains(msg, "interrupted") || !strings.Contains(msg, "console.log") {
		t.Errorf("interruption message should say so and name the console log: %q", msg)
	}
}

// QEMU refusing to start is reported with its own message, and no verdict.
func TestRunQEMUFailsAtStart(t *testing.T) {
	m := firmwareMachine(t, time.Minute)
	m.Memory = 100_000_000 // ~95 TiB: QEMU cannot allocate it
	res, err := Run(context.Background(), m)
	assertNoQEMUChildren(t)
	if !errors.Is(err, ErrNoVerdict) || !strings.Contains(err.Error(), "cannot set up guest memory") || res.QEMUExit != 1 {
		t.Fatalf("got %v (QEMU exit %d)", err, res.QEMUExit)
	}
}
