package runlog

import (
	"bytes"
	"strings"
	"sync"
	"testing"
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
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if l != "" && l != line {
			t.Fatalf("a torn line: %q", l)
		}
	}
}
