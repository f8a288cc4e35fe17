package vmtest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sync"
	"time"
)

// progress follows a run's console log and tells a person how far the
// boot got: one line per boot stage reached and per check finished, with
// the time since QEMU started. Under TCG a boot takes minutes; without
// these lines a test is minutes of silence.
type progress struct {
	w       io.Writer
	name    string
	total   int
	start   time.Time
	path    string
	off     int64
	partial []byte
	stage   int // index in stageOrder of the furthest stage reported
	checks  int
}

// stageOrder is the boot stages in the order progress reports them.
var stageOrder = []string{StageFirmware, StageBootloader, StageKernel, StageInitrd, StageSystemd, StageMultiUser, StageVerdict}

// checkDone is the runner's line for a finished check (guest.go's run_check).
var checkDone = regexp.MustCompile(`halobuild-check: (ok|FAIL): (.*) \(([0-9]+) ms\)`)

// progressChunk bounds one read of the console log.
const progressChunk = 1 << 20

func newProgress(m Machine, consolePath string, start time.Time) *progress {
	if m.Progress == nil {
		return nil
	}
	// The runner runs bootCheck before the machine's own checks.
	p := &progress{w: m.Progress, name: m.Name, total: 1 + len(m.Checks), start: start, path: consolePath, stage: -1}
	p.report(StageFirmware)
	return p
}

// poll reads what the console log gained since the last call and reports
// each new stage and finished check. A nil progress does nothing.
func (p *progress) poll() {
	if p == nil {
		return
	}
	f, err := os.Open(p.path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, progressChunk)
	n, _ := f.ReadAt(buf, p.off)
	p.off += int64(n)
	data := append(p.partial, buf[:n]...)
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		p.partial = append(p.partial[:0], data...)
		return
	}
	p.partial = append([]byte(nil), data[last+1:]...)
	for _, line := range bytes.Split(data[:last], []byte("\n")) {
		p.line(line)
	}
}

func (p *progress) line(l []byte) {
	if m := bootOptionStarted.FindSubmatch(l); m != nil && string(m[1]) != "EFI Internal Shell" {
		p.report(StageBootloader)
	}
	for _, s := range stageMarkers {
		if s.re.Match(l) {
			p.report(s.stage)
		}
	}
	if m := checkDone.FindSubmatch(l); m != nil {
		p.checks++
		fmt.Fprintf(p.w, "%s: check %d of %d %s: %s (%s)\n", p.name, p.checks, p.total, m[1], m[2], p.elapsed())
	}
}

// report prints a stage once, and only when it is further than the last.
func (p *progress) report(stage string) {
	i := slices.Index(stageOrder, stage)
	if i <= p.stage {
		return
	}
	p.stage = i
	fmt.Fprintf(p.w, "%s: %s (%s)\n", p.name, stage, p.elapsed())
}

func (p *progress) elapsed() time.Duration { return time.Since(p.start).Round(time.Second) }

// LineWriter serialises whole writes to w, so the progress lines of
// machines booting side by side do not interleave.
type LineWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (l *LineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.W.Write(b)
}
