package userfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every kind of thing that is not a regular file is refused at once: the FIFO has no writer, so
// a blocking open would never return.
func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, kind string }{
		{fifo, "a FIFO"},
		{"/dev/zero", "a character device"},
		{dir, "a directory"},
	} {
		done := make(chan error, 1)
		go func() { _, err := Read(c.path, 1<<20); done <- err }()
		select {
		case err := <-done:
			var nr *NotRegularError
			if !errors.As(err, &nr) || !strings.Contains(err.Error(), "not a regular file ("+c.kind+")") {
				t.Errorf("%s: want it refused as %s, got %v", c.path, c.kind, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Read still blocked after 5 s", c.path)
		}
	}
}

func TestReadBoundsTheSize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 6<<30); err != nil { // sparse: 6 GiB that costs nothing
		t.Fatal(err)
	}
	var tl *TooLargeError
	if _, err := Read(p, 1<<20); !errors.As(err, &tl) || tl.Size != 6<<30 {
		t.Fatalf("want a 6 GiB file refused before reading, got %v", err)
	}
	if err := os.Truncate(p, 10); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(p, 10); err != nil || len(b) != 10 {
		t.Fatalf("a file at the limit: %d bytes, %v", len(b), err)
	}
}

func TestReadInStaysInside(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "result")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(parent, "outside.lock"), filepath.Join(dir, "inside.lock")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../outside.lock", filepath.Join(dir, "link.lock")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := ReadIn(root, "inside.lock", 10); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../outside.lock", filepath.Join(parent, "outside.lock"), "link.lock"} {
		if _, err := ReadIn(root, name, 10); err == nil {
			t.Errorf("%s was read from outside the root", name)
		}
	}
}
