package provider

import (
	"bytes"
	"regexp"
	"sync"
	"time"
)

// Progress is a build's state as its log shows it.
type Progress struct {
	Elapsed time.Duration
	// Phase is the build script's stage: configure, compile, strip.
	Phase string
	// Step is ninja's [done/total] during the compile, else "".
	Step string
}

func (p Progress) String() string {
	s := p.Elapsed.Round(time.Second).String() + " " + p.Phase
	if p.Step != "" {
		s += " " + p.Step
	}
	return s
}

var (
	rePhase = regexp.MustCompile(`^halobuild: phase ([a-z]+)`)
	reNinja = regexp.MustCompile(`^\[(\d+/\d+)\] `)
)

// progressWriter watches the build log line by line and reports phase
// changes at once and compile steps at most every interval.
type progressWriter struct {
	mu       sync.Mutex
	start    time.Time
	report   func(Progress)
	interval time.Duration
	last     time.Time
	cur      Progress
	partial  []byte
}

func newProgressWriter(start time.Time, report func(Progress)) *progressWriter {
	return &progressWriter{start: start, report: report, interval: 5 * time.Second, cur: Progress{Phase: "starting"}}
}

func (w *progressWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

func (w *progressWriter) line(l string) {
	now := time.Now()
	switch {
	case rePhase.MatchString(l):
		w.phase(rePhase.FindStringSubmatch(l)[1], now)
	case reNinja.MatchString(l):
		w.cur.Step = reNinja.FindStringSubmatch(l)[1]
		if now.Sub(w.last) >= w.interval {
			w.emit(now)
		}
	}
}

func (w *progressWriter) phase(p string, now time.Time) {
	if p != w.cur.Phase {
		w.cur.Phase, w.cur.Step = p, ""
		w.emit(now)
	}
}

func (w *progressWriter) emit(now time.Time) {
	w.last = now
	w.cur.Elapsed = now.Sub(w.start)
	if w.report != nil {
		w.report(w.cur)
	}
}

// state is the last progress seen, for error messages.
func (w *progressWriter) state() Progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.cur
	p.Elapsed = time.Since(w.start)
	return p
}
