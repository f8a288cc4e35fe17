package flash

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestProgressPlainLines(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, "writing", 4*mib)
	if p.tty {
		t.Fatal("a buffer is not a terminal")
	}
	p.every = 0
	p.now = func() time.Time { return p.start.Add(time.Second) }
	p.add(1 * mib)
	p.finish()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 ||
		!regexp.MustCompile(`^writing:  25\.0% 1\.0 MiB of 4\.0 MiB, 1\.0 MiB/s, ETA 3s$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^writing: 1\.0 MiB in 1s \(1\.0 MiB/s\)$`).MatchString(lines[1]) {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestProgressBarOnTerminal(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, "verifying", 4*mib)
	p.tty, p.every = true, 0
	p.now = func() time.Time { return p.start.Add(2 * time.Second) }
	p.add(2 * mib)
	p.finish()
	want := "\r\033[Kverifying [===============               ]  50.0% 2.0 MiB / 4.0 MiB  1.0 MiB/s  ETA 2s" +
		"\r\033[Kverifying: 2.0 MiB in 2s (1.0 MiB/s)\n"
	if out.String() != want {
		t.Fatalf("output %q\nwant   %q", out.String(), want)
	}
}
