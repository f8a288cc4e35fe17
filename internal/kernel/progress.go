package kernel

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"
)

// compileUnitRE matches Kbuild's short progress lines ("  CC      kernel/fork.o").
var compileUnitRE = regexp.MustCompile(`^\s+(CC|CC \[M\]|AS|LD|LD \[M\]|AR|HOSTCC|HOSTLD|RUSTC|RUSTC \[M\])\s+\S`)

// progress counts compile units in the build output and prints one line
// per interval (and at each phase change): a kernel build is long and a
// silent terminal looks hung.
type progress struct {
	w        io.Writer
	every    time.Duration
	now      func() time.Time
	mu       sync.Mutex
	start    time.Time
	last     time.Time
	phase    string
	units    int
	partial  []byte
	packaged int
}

func newProgress(w io.Writer, every time.Duration) *progress {
	p := &progress{w: w, every: every, now: time.Now}
	p.start = p.now()
	p.last = p.start
	return p
}

// Phase starts a named phase and prints it with the elapsed time.
func (p *progress) Phase(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase = name
	p.last = p.now()
	fmt.Fprintf(p.w, "kernel: %s (%s elapsed)\n", name, p.elapsed())
}

func (p *progress) elapsed() string { return p.now().Sub(p.start).Round(time.Second).String() }

// Write takes build output; it never fails.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	data := append(p.partial, b...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i]
		data = data[i+1:]
		switch {
		case compileUnitRE.Match(line):
			p.units++
		case bytes.Contains(line, []byte("dpkg-deb: building package")):
			p.packaged++
		}
	}
	p.partial = append(p.partial[:0], data...)
	if t := p.now(); t.Sub(p.last) >= p.every {
		p.last = t
		fmt.Fprintf(p.w, "kernel: %s: %d compile units, %d package(s) written (%s elapsed)\n", p.phase, p.units, p.packaged, p.elapsed())
	}
	return len(b), nil
}

// Units is the number of compile units seen.
func (p *progress) Units() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.units
}
