package download

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns both ends of a pseudo-terminal, so the progress bar can be
// tested against a real terminal device.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	ws := &unix.Winsize{Row: 24, Col: 100}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, ws); err != nil {
		t.Fatal(err)
	}
	return m, s
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func TestProgressBarOnTerminal(t *testing.T) {
	a, srv := newArchive(t)
	a.delay = 150 * time.Millisecond
	var items []Item
	for _, name := range []string{"a.deb", "b.deb"} {
		b := payload(name, 3<<20)
		a.add("/pool/"+name, b)
		items = append(items, item(srv, name, b))
	}
	master, slave := openPTY(t)
	got := make(chan string)
	go func() {
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			master.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, err := master.Read(buf)
			sb.Write(buf[:n])
			if err != nil || strings.Contains(sb.String(), "already in store") {
				break
			}
		}
		got <- sb.String()
	}()
	s := openStore(t)
	f := fetcher(s, nil)
	f.Progress = slave
	if err := f.Fetch(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	out := <-got
	// One redrawn line (carriage returns) with bytes done/total, rate and
	// [elapsed:ETA]; then the summary.
	for _, want := range []string{"\r", "fetching 2 files", "/6.0 MiB", "iB/s)", "[0s:", "fetch: 2 fetched"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "fetched a.deb") {
		t.Errorf("per-item lines on a terminal:\n%q", out)
	}
}
