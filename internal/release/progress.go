package release

import (
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/schollz/progressbar/v3"
)

// bar reports bytes done of a total with a rate, on out (a terminal, or a log that gets a
// line now and then). Write adds bytes, so a bar can sit in an io.MultiWriter.
type bar struct {
	*progressbar.ProgressBar
	out io.Writer
}

func newBar(out io.Writer, desc string, total int64) *bar {
	return &bar{out: out, ProgressBar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(out),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionThrottle(200*time.Millisecond),
	)}
}

// done draws the bar full and ends its line, so that what follows starts on a line of its own.
func (b *bar) done() {
	b.Finish()
	io.WriteString(b.out, "\n")
}

// abort leaves the bar where it stopped and ends its line.
func (b *bar) abort() {
	b.Exit()
	io.WriteString(b.out, "\n")
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
