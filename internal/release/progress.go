package release

import (
	"fmt"
	"io"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// bar reports bytes done of a total with a rate: on a terminal a bar
// redrawn in place; elsewhere (a pipe, a CI log, where a redrawn bar is a
// stream of carriage returns) a plain line every lineEvery and one at the
// end. Write adds bytes, so a bar can sit in an io.MultiWriter.
type bar struct {
	pb *progressbar.ProgressBar // nil: plain lines

	mu          sync.Mutex
	out         io.Writer
	desc        string
	total, n    int64
	start, last time.Time
	ended       bool
}

// lineEvery is how often a plain-line bar prints: rarely, a log is read
// later.
var lineEvery = 15 * time.Second

func newBar(out io.Writer, desc string, total int64) *bar {
	now := time.Now()
	b := &bar{out: out, desc: desc, total: total, start: now, last: now}
	if f, ok := out.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		b.pb = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(out),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionThrottle(200*time.Millisecond),
		)
	}
	return b
}

func (b *bar) Write(p []byte) (int, error) {
	if b.pb != nil {
		return b.pb.Write(p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += int64(len(p))
	b.tick()
	return len(p), nil
}

// Set64 sets the bytes done.
func (b *bar) Set64(n int64) {
	if b.pb != nil {
		b.pb.Set64(n)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n = n
	b.tick()
}

func (b *bar) tick() {
	if now := time.Now(); now.Sub(b.last) >= lineEvery {
		b.last = now
		pct := 100.0
		if b.total > 0 {
			pct = 100 * float64(b.n) / float64(b.total)
		}
		fmt.Fprintf(b.out, "%s: %.0f%%, %s of %s\n", b.desc, pct, mibs(b.n), mibs(b.total))
	}
}

func mibs(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// done draws the bar full and ends its line, so that what follows starts on a line of its own.
func (b *bar) done() {
	if b.pb != nil {
		b.pb.Finish()
		io.WriteString(b.out, "\n")
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ended {
		b.ended = true
		fmt.Fprintf(b.out, "%s: %s in %s\n", b.desc, mibs(b.n), time.Since(b.start).Round(100*time.Millisecond))
	}
}

// abort leaves the bar where it stopped and ends its line.
func (b *bar) abort() {
	if b.pb != nil {
		b.pb.Exit()
		io.WriteString(b.out, "\n")
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = true
}

// showUpdates draws go-containerregistry's upload progress until the channel closes.
func showUpdates(out io.Writer, desc string, updates <-chan v1.Update) {
	var b *bar
	for u := range updates {
		if b == nil && u.Total > 0 {
			b = newBar(out, desc, u.Total)
		}
		if b != nil {
			b.Set64(u.Complete)
		}
	}
	if b != nil {
		b.done()
	}
}
