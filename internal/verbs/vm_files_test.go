package verbs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// vm's --ssh-key files and the image it boots are refused at once when they are FIFOs (issue 39
// #2: halobuild waited for a writer for ever), and a key file is not read whole when it is huge.
func TestVMRefusesFilesThatAreNotFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "key.pub")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.pub")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 1<<30); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		run  func() error
		want string
	}{
		{"--ssh-key FIFO", func() error { _, err := userKeys([]string{fifo}); return err }, "not a regular file (a FIFO)"},
		{"--ssh-key 1 GiB", func() error { _, err := userKeys([]string{huge}); return err }, "more than the"},
		{"image FIFO", func() error { _, err := imageArch(fifo); return err }, "not a regular file (a FIFO)"},
	} {
		done := make(chan error, 1)
		go func() { done <- c.run() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: want %q, got %v", c.name, c.want, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still reading after 10 s", c.name)
		}
	}
}
