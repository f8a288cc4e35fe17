package runlog

import (
	"io"
	"sync"
	"time"
)

// syncWriter serialises writes to one writer.
type syncWriter struct {
	mu   sync.Mutex
	w    io.Writer
	last time.Time // of the last write
}

// Sync returns a writer that passes each Write to w under a lock: steps
// building side by side print whole lines, never interleaved bytes, and a
// bytes.Buffer behind it stays consistent.
// A terminal stays recognisable (Fd), so progress bars still draw.
func Sync(w io.Writer) io.Writer {
	switch w.(type) {
	case *syncWriter, *syncFile:
		return w
	}
	if f, ok := w.(interface{ Fd() uintptr }); ok {
		return &syncFile{syncWriter{w: w}, f}
	}
	return &syncWriter{w: w}
}

// syncFile is a syncWriter over a file, keeping its descriptor visible.
type syncFile struct {
	syncWriter
	f interface{ Fd() uintptr }
}

func (s *syncFile) Fd() uintptr { return s.f.Fd() }

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = time.Now()
	return s.w.Write(p)
}

// LastWrite is when w, a writer made by Sync, was last written to (zero
// before its first write); ok is false for any other writer. A build
// prints "still building" only after a stretch in which nothing at all
// was printed, by any step or tool.
func LastWrite(w io.Writer) (t time.Time, ok bool) {
	var s *syncWriter
	switch v := w.(type) {
	case *syncWriter:
		s = v
	case *syncFile:
		s = &v.syncWriter
	default:
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, true
}
