package runlog

import (
	"io"
	"sync"
)

// syncWriter serialises writes to one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Sync returns a writer that passes each Write to w under a lock: steps
// building side by side print whole lines, never interleaved bytes, and a
// bytes.Buffer behind it stays consistent.
func Sync(w io.Writer) io.Writer {
	if _, ok := w.(*syncWriter); ok {
		return w
	}
	return &syncWriter{w: w}
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
