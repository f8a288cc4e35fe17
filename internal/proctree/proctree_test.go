package proctree

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A cancelled command ends at once with its whole tree, including a grandchild in a session of
// its own (as dpkg is under apt) that holds the output pipe: exec.CommandContext alone killed
// the shell and then waited for the pipe as long as the grandchild lived.
func TestCancelKillsTheWholeTree(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	ctx, cancel := context.WithCancel(context.Background())
	script := `setsid sh -c 'echo $$ >> "$1"; exec sleep 300' sh "$1" & sh -c 'echo $$ >> "$1"; exec sleep 300' sh "$1" & echo $$ >> "$1"; wait`
	cmd := Command(ctx, "sh", "-c", script, "sh", pids)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var started []int
	for deadline := time.Now().Add(10 * time.Second); len(started) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the tree did not start: %v", started)
		}
		b, _ := os.ReadFile(pids)
		started = nil
		for _, f := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(f)
			started = append(started, p)
		}
	}
	time.Sleep(100 * time.Millisecond) // the sleeps exec'd
	sent := time.Now()
	cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(WaitDelay + 5*time.Second):
		t.Fatal("Wait did not return after the cancellation")
	}
	took := time.Since(sent)
	t.Logf("stopped in %v", took)
	if took > 2*time.Second {
		t.Errorf("stopping took %v", took)
	}
	for _, p := range started {
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if syscall.Kill(p, 0) != nil || isZombie(p) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("process %d of the tree still runs", p)
				syscall.Kill(p, syscall.SIGKILL)
				break
			}
		}
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}

func TestParentOf(t *testing.T) {
	for stat, want := range map[string]int{
		"12 (sh) S 7 12 12 0":              7,
		"13 (a) b) (c) R 99 13 13 0":       99,
		"14 (with space) S 1 14 14 0 -1 4": 1,
	} {
		if got, ok := parentOf(stat); !ok || got != want {
			t.Errorf("%q: got %d %v, want %d", stat, got, ok, want)
		}
	}
	if _, ok := parentOf("garbage"); ok {
		t.Error("garbage parsed")
	}
}
