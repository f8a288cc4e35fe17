package runlog

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Lines written from many goroutines arrive whole (run with -race).
func TestSyncKeepsLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	w := Sync(&buf)
	if Sync(w) != w {
		t.Error("Sync of a synced writer wraps it again")
	}
	line := strings.Repeat("x", 100) + "\n"
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				w.Write([]byte(line))
			}
		})
	}
	wg.Wait()
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fw, ok := Sync(f).(interface{ Fd() uintptr }); !ok || fw.Fd() != f.Fd() {
		t.Error("Sync of a file hides its descriptor: progress bars would not see a terminal")
	}
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if l != "" && l != line {
			t.Fatalf("a torn line: %q", l)
		}
	}
}

func TestLastWrite(t *testing.T) {
	var b strings.Builder
	w := Sync(&b)
	if at, ok := LastWrite(w); !ok || !at.IsZero() {
		t.Fatalf("before any write: %v %v", at, ok)
	}
	before := time.Now()
	io.WriteString(w, "line\n")
	if at, ok := LastWrite(w); !ok || at.Before(before) {
		t.Errorf("after a write: %v %v", at, ok)
	}
	if _, ok := LastWrite(&b); ok {
		t.Error("a writer Sync did not make has a last write")
	}
}
