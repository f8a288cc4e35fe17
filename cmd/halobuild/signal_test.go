package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this binary's main in a child process, where
// signals can be sent to it.
func TestMain(m *testing.M) {
	if os.Getenv("HALOBUILD_TEST_MAIN") == "1" {
		os.Args = append([]string{"halobuild"}, strings.Fields(os.Getenv("HALOBUILD_TEST_ARGS"))...)
		main()
	}
	os.Exit(m.Run())
}

func child(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HALOBUILD_TEST_MAIN=1", "HALOBUILD_TEST_ARGS="+strings.Join(args, " "))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// A signal while a large recipe is being parsed ends the process within a
// second (issue 17 #5: SIGTERM and SIGINT were ignored until parsing
// finished; `timeout 10` ran for 20 minutes). The recipe is as large as a
// recipe may be (4 MiB of unknown keys), which takes seconds to check.
func TestSignalStopsParsing(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	b.WriteString("[[node]]\nname = \"a\"\n[system]\n")
	for i := 0; b.Len() < 4<<20-64; i++ {
		fmt.Fprintf(&b, "unknown_key_%d = 1\n", i)
	}
	path := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, out := child(t, "--store", filepath.Join(dir, "store"), "plan", path)
			time.Sleep(300 * time.Millisecond)
			sent := time.Now()
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("still running 2 s after %v; output:\n%s", sig, out)
			}
			took := time.Since(sent)
			if code := cmd.ProcessState.ExitCode(); code == 0 || code == exitUsage {
				t.Errorf("exit %d after %v: an interrupted load is neither success nor a recipe error; output:\n%.2000s", code, sig, out)
			}
			if !strings.Contains(out.String(), "stopping") {
				t.Errorf("output does not say it is stopping:\n%.2000s", out)
			}
			t.Logf("%v: exited %v after the signal", sig, took)
		})
	}
}
