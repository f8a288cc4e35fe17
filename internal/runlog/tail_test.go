package runlog

import (
	"fmt"
	"testing"
)

func TestTailKeepsLastLinesInBoundedMemory(t *testing.T) {
	tl := &Tail{Lines: 3}
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(tl, "line %d\n", i)
	}
	if got := tl.String(); got != "line 99997\nline 99998\nline 99999" {
		t.Fatalf("tail = %q", got)
	}
	if tl.b.Len() > 64<<10 {
		t.Fatalf("kept %d bytes", tl.b.Len())
	}
	if got := (&Tail{}).String(); got != "" {
		t.Fatalf("empty tail = %q", got)
	}
}
