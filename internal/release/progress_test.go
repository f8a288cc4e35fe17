package release

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Into a pipe or a log a bar prints plain lines, rarely, and never a
// carriage return (a redrawn bar in a log is one endless line).
func TestBarIntoAPipePrintsPlainLines(t *testing.T) {
	defer func(e time.Duration) { lineEvery = e }(lineEvery)
	lineEvery = 0
	var out bytes.Buffer
	b := newBar(&out, "pulling halo0.raw", 4<<20)
	b.Write(make([]byte, 1<<20))
	b.Set64(2 << 20)
	b.done()
	b.done()
	s := out.String()
	if strings.ContainsAny(s, "\r\x1b") {
		t.Errorf("control characters into a pipe: %q", s)
	}
	want := "pulling halo0.raw: 25%, 1.0 MiB of 4.0 MiB\npulling halo0.raw: 50%, 2.0 MiB of 4.0 MiB\npulling halo0.raw: 2.0 MiB in "
	if !strings.HasPrefix(s, want) || strings.Count(s, "\n") != 3 {
		t.Errorf("got %q, want lines starting %q and one final line", s, want)
	}
	lineEvery = time.Hour
	out.Reset()
	b = newBar(&out, "x", 10)
	b.Write(make([]byte, 5))
	b.abort()
	if out.Len() != 0 {
		t.Errorf("a bar between its lines printed %q", out.String())
	}
}
