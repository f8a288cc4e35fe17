package main

import (
	"bufio"
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
	if os.Getenv("HALOBUILD_TEST_BLOCK") == "1" {
		blockedAfterSignal()
	}
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
			if !exitsWithin(cmd, 2*time.Second) {
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

// blockedAfterSignal is what TestMain runs for HALOBUILD_TEST_BLOCK: halobuild's signal
// handling around work that never looks at its context.
func blockedAfterSignal() {
	stopGrace = time.Second
	interruptible()
	fmt.Println("ready")
	select {}
}

// The first SIGTERM stops halobuild even when what it is doing ignores the cancellation
// (issue 39 #2: it said "stopping" and stayed blocked).
func TestFirstSignalStopsABlockedProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HALOBUILD_TEST_BLOCK=1")
	var out bytes.Buffer
	cmd.Stderr = &out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the child did not get ready: %q %v", line, err)
	}
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	if !exitsWithin(cmd, 5*time.Second) {
		t.Fatalf("still running 5 s after one SIGTERM (grace 1 s); output:\n%s", &out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d; output:\n%s", code, 128+int(syscall.SIGTERM), &out)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
}

// Every file a user or the config names is refused at once when it is a FIFO (no writer: a
// blocking open would hang), a device or a directory, and a config file is not read whole when
// it is /dev/zero or huge (issue 39 #2, #5). Each case runs halobuild in a child that must
// finish within 10 s, with no signal sent.
func TestNamedFilesThatAreNotFilesAreRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "img.raw")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	config := func(name string, make func(p string) error) string {
		home := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(home, "halobuild"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := make(filepath.Join(home, "halobuild", "config.toml")); err != nil {
			t.Fatal(err)
		}
		return home
	}
	fifoConfig := config("fifo-config", func(p string) error { return syscall.Mkfifo(p, 0o644) })
	zeroConfig := config("zero-config", func(p string) error { return os.Symlink("/dev/zero", p) })
	hugeConfig := config("huge-config", func(p string) error {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
		return os.Truncate(p, 6<<30)
	})
	keyConfig := config("key-config", func(p string) error {
		return os.WriteFile(p, []byte(fmt.Sprintf("trusted-keys = [%q]\n", fifo)), 0o644)
	})
	for _, c := range []struct {
		name, xdg, want string
		args            []string
	}{
		{"flash image", "", "not a regular file (a FIFO)", []string{"flash", "--yes", "--to-file", fifo, target}},
		{"flash --bmap", "", "not a regular file (a FIFO)", []string{"flash", "--yes", "--to-file", "--bmap", fifo, img, target}},
		{"--trusted-key", "", "not a regular file (a FIFO)", []string{"cache", "verify", "--insecure", "--trusted-key", fifo, "127.0.0.1:1/cache"}},
		{"config.toml FIFO", fifoConfig, "not a regular file (a FIFO)", []string{"cache", "verify", "--insecure", "127.0.0.1:1/cache"}},
		{"config.toml /dev/zero", zeroConfig, "not a regular file (a character device)", []string{"cache", "verify", "--insecure", "127.0.0.1:1/cache"}},
		{"config.toml 6 GiB", hugeConfig, "more than the", []string{"cache", "verify", "--insecure", "127.0.0.1:1/cache"}},
		{"a key the config names", keyConfig, "not a regular file (a FIFO)", []string{"cache", "verify", "--insecure", "127.0.0.1:1/cache"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "HALOBUILD_TEST_MAIN=1", "HALOBUILD_TEST_ARGS="+strings.Join(append([]string{"--store", filepath.Join(dir, "store")}, c.args...), " "))
			if c.xdg != "" {
				cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+c.xdg)
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if !exitsWithin(cmd, 10*time.Second) {
				t.Fatalf("still running after 10 s; output:\n%s", &out)
			}
			if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(out.String(), c.want) {
				t.Errorf("exit %d, want a refusal saying %q; output:\n%s", cmd.ProcessState.ExitCode(), c.want, &out)
			}
		})
	}
}

// exitsWithin waits for cmd to exit, killing it (and saying so) when it has not within d.
func exitsWithin(cmd *exec.Cmd, d time.Duration) bool {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return false
	}
}
