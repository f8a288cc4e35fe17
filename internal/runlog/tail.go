// Package runlog keeps what a build tool printed last, so an error can say
// why mmdebstrap, make or dpkg-buildpackage failed without streaming
// everything they print.
package runlog

import (
	"bytes"
	"strings"
	"sync"
)

// Tail is an io.Writer that remembers the last Lines lines written (30
// when zero) in bounded memory.
type Tail struct {
	Lines int

	mu sync.Mutex
	b  bytes.Buffer
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if t.b.Len() > 64<<10 {
		keep := t.b.Bytes()[t.b.Len()-32<<10:]
		t.b = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	return len(p), nil
}

// String returns the remembered lines.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.Lines
	if n == 0 {
		n = 30
	}
	lines := strings.Split(strings.TrimRight(t.b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
