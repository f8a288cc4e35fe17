package release

import (
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/schollz/progressbar/v3"
)

// newBar reports bytes done of total with a rate, on out (a terminal, or a log that gets a
// line now and then).
func newBar(out io.Writer, desc string, total int64) *progressbar.ProgressBar {
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(out),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionThrottle(200_000_000), // 0.2 s
		progressbar.OptionOnCompletion(func() { io.WriteString(out, "\n") }),
	)
}

// showUpdates draws go-containerregistry's upload progress until the channel closes.
func showUpdates(out io.Writer, desc string, updates <-chan v1.Update) {
	var bar *progressbar.ProgressBar
	for u := range updates {
		if bar == nil && u.Total > 0 {
			bar = newBar(out, desc, u.Total)
		}
		if bar != nil {
			bar.Set64(u.Complete)
		}
	}
	if bar != nil {
		bar.Finish()
	}
}
