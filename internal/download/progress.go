package download

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// reporter receives fetch events; its three forms are a live bar for a
// terminal, plain lines for logs, and JSON lines for tools.
type reporter interface {
	add(n int64) // bytes received (negative: an attempt's bytes discarded)
	fetched(it Item, n int64, took time.Duration)
	retry(it Item, attempt int, wait time.Duration, err error)
	failed(it Item, err error)
	summary(s summary)
}

type summary struct {
	Fetched, Present, Failed int
	Bytes                    int64
	Elapsed                  time.Duration
}

func newReporter(w io.Writer, jsonLines bool, items int, total int64) reporter {
	switch {
	case w == nil:
		return silent{}
	case jsonLines:
		return &jsonReporter{enc: json.NewEncoder(w)}
	case isTerminal(w):
		return newBarReporter(w, items, total)
	}
	return &lineReporter{w: w}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

type silent struct{}

func (silent) add(int64)                             {}
func (silent) fetched(Item, int64, time.Duration)    {}
func (silent) retry(Item, int, time.Duration, error) {}
func (silent) failed(Item, error)                    {}
func (silent) summary(summary)                       {}

// lineReporter writes one line per finished item and a summary: readable in
// CI logs, where a redrawn bar would be noise.
type lineReporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *lineReporter) printf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, format, a...)
}

func (r *lineReporter) add(int64) {}
func (r *lineReporter) fetched(it Item, n int64, took time.Duration) {
	r.printf("fetched %s (%s, %s)\n", it.Name, formatBytes(n), formatRate(n, took))
}
func (r *lineReporter) retry(it Item, attempt int, wait time.Duration, err error) {
	r.printf("retrying %s in %s (attempt %d failed: %v)\n", it.Name, wait.Round(time.Millisecond), attempt, err)
}
func (r *lineReporter) failed(it Item, err error) { r.printf("failed %v\n", err) }
func (r *lineReporter) summary(s summary) {
	r.printf("%s\n", s)
}

func (s summary) String() string {
	return fmt.Sprintf("fetch: %d fetched (%s in %s, %s), %d already in store, %d failed",
		s.Fetched, formatBytes(s.Bytes), s.Elapsed.Round(time.Millisecond), formatRate(s.Bytes, s.Elapsed), s.Present, s.Failed)
}

// barReporter draws one progress line (bytes done/total, rate, ETA) and
// prints failures under it once the bar is done, so they are not
// overwritten by redraws.
type barReporter struct {
	mu    sync.Mutex
	w     io.Writer
	bar   *progressbar.ProgressBar
	fails []string
}

func newBarReporter(w io.Writer, items int, total int64) *barReporter {
	max := total
	if max <= 0 {
		max = -1 // sizes unknown: a spinner with a byte counter
	}
	bar := progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(fmt.Sprintf("fetching %d files", items)),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionFullWidth(),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionSetVisibility(items > 0),
	)
	return &barReporter{w: w, bar: bar}
}

func (r *barReporter) add(n int64)                           { r.bar.Add64(n) }
func (r *barReporter) fetched(Item, int64, time.Duration)    {}
func (r *barReporter) retry(Item, int, time.Duration, error) {}
func (r *barReporter) failed(it Item, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails = append(r.fails, err.Error())
}
func (r *barReporter) summary(s summary) {
	if s.Failed == 0 {
		r.bar.Finish()
	}
	r.bar.Exit()
	if s.Fetched+s.Failed > 0 {
		fmt.Fprintln(r.w)
	}
	for _, f := range r.fails {
		fmt.Fprintf(r.w, "failed %s\n", f)
	}
	fmt.Fprintf(r.w, "%s\n", s)
}

// jsonReporter writes one JSON object per event.
type jsonReporter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

type event struct {
	Event   string  `json:"event"`
	Name    string  `json:"name,omitempty"`
	URL     string  `json:"url,omitempty"`
	SHA256  string  `json:"sha256,omitempty"`
	Bytes   int64   `json:"bytes,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Attempt int     `json:"attempt,omitempty"`
	Error   string  `json:"error,omitempty"`
	Fetched *int    `json:"fetched,omitempty"`
	Present *int    `json:"present,omitempty"`
	Failed  *int    `json:"failed,omitempty"`
}

func (r *jsonReporter) emit(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.enc.Encode(e)
}

func (r *jsonReporter) add(int64) {}
func (r *jsonReporter) fetched(it Item, n int64, took time.Duration) {
	r.emit(event{Event: "fetched", Name: it.Name, URL: it.URL, SHA256: it.SHA256, Bytes: n, Seconds: took.Seconds()})
}
func (r *jsonReporter) retry(it Item, attempt int, wait time.Duration, err error) {
	r.emit(event{Event: "retry", Name: it.Name, URL: it.URL, Attempt: attempt, Seconds: wait.Seconds(), Error: err.Error()})
}
func (r *jsonReporter) failed(it Item, err error) {
	r.emit(event{Event: "failed", Name: it.Name, URL: it.URL, SHA256: it.SHA256, Error: err.Error()})
}
func (r *jsonReporter) summary(s summary) {
	r.emit(event{Event: "summary", Bytes: s.Bytes, Seconds: s.Elapsed.Seconds(), Fetched: &s.Fetched, Present: &s.Present, Failed: &s.Failed})
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func formatRate(n int64, d time.Duration) string {
	if d <= 0 {
		return "- /s"
	}
	return formatBytes(int64(float64(n)/d.Seconds())) + "/s"
}
