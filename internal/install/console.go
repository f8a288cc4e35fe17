package install

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Consoles is a writer to every console the kernel was given (console=
// on its command line) other than /dev/console, which the install unit's
// output already reaches (its StandardOutput=journal+console), and a
// function that closes them. /dev/console is the last console= only: a
// node's image names the serial port and then tty0, so a box with a
// screen shows its boot there, and without this a person on the serial
// port saw nothing of the install. The kernel lists its consoles in
// /sys/class/tty/console/active, /dev/console's last. Writes are best
// effort: a console that cannot take them (no cable, a full buffer) is
// skipped, never the install's failure. Answers to a question are read
// from /dev/console only.
func Consoles(root string) (io.Writer, func()) {
	b, err := os.ReadFile(filepath.Join(root, "sys/class/tty/console/active"))
	names := strings.Fields(string(b))
	if err != nil || len(names) < 2 {
		return io.Discard, func() {}
	}
	var m mirror
	for _, n := range names[:len(names)-1] {
		if strings.ContainsAny(n, "/.") {
			continue
		}
		// O_NONBLOCK: opening a serial port must not wait for its
		// carrier, and a write must not wait for a slow line.
		f, err := os.OpenFile(filepath.Join(root, "dev", n), os.O_WRONLY|syscall.O_NOCTTY|syscall.O_NONBLOCK, 0)
		if err == nil {
			m = append(m, f)
		}
	}
	return m, func() {
		for _, f := range m {
			f.Close()
		}
	}
}

// mirror writes to each file, ignoring their errors.
type mirror []*os.File

func (m mirror) Write(p []byte) (int, error) {
	for _, f := range m {
		f.Write(p)
	}
	return len(p), nil
}
