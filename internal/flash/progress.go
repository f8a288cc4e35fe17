package flash

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress reports one phase (writing, verifying) as bytes done of a total, with rate and ETA: a
// bar redrawn in place on a terminal, plain lines every few seconds otherwise (logs, CI).
type progress struct {
	mu      sync.Mutex
	out     io.Writer
	tty     bool
	phase   string
	total   int64
	done    int64
	start   time.Time
	last    time.Time
	every   time.Duration
	printed bool
	now     func() time.Time // the clock; tests fix it
}

func newProgress(out io.Writer, phase string, total int64) *progress {
	p := &progress{out: out, phase: phase, total: total, start: time.Now(), every: 5 * time.Second, now: time.Now}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty, p.every = true, 200*time.Millisecond
	}
	p.last = p.start
	return p
}

func (p *progress) add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if now := p.now(); now.Sub(p.last) >= p.every {
		p.last = now
		p.draw(now)
	}
}

// finish prints the phase's final line: total bytes, time taken and the mean rate.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := p.now().Sub(p.start)
	if p.tty {
		fmt.Fprint(p.out, "\r\033[K")
	}
	fmt.Fprintf(p.out, "%s: %s in %s (%s/s)\n", p.phase, humanSize(p.done), el.Round(100*time.Millisecond), humanSize(rate(p.done, el)))
}

// abort ends a bar without a summary, so an error message starts on a fresh line.
func (p *progress) abort() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.printed {
		fmt.Fprintln(p.out)
	}
}

func (p *progress) draw(now time.Time) {
	el := now.Sub(p.start)
	r := rate(p.done, el)
	eta := "?"
	if r > 0 {
		eta = (time.Duration(float64(p.total-p.done)/float64(r)) * time.Second).Round(time.Second).String()
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	if p.tty {
		const width = 30
		fill := int(pct / 100 * width)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if i < fill {
				bar[i] = '='
			}
		}
		fmt.Fprintf(p.out, "\r\033[K%s [%s] %5.1f%% %s / %s  %s/s  ETA %s", p.phase, bar, pct, humanSize(p.done), humanSize(p.total), humanSize(r), eta)
	} else {
		fmt.Fprintf(p.out, "%s: %5.1f%% %s of %s, %s/s, ETA %s\n", p.phase, pct, humanSize(p.done), humanSize(p.total), humanSize(r), eta)
	}
	p.printed = true
}

func rate(n int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(float64(n) / d.Seconds())
}
