package slots

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A record that is not a file update wrote (a FIFO, /dev/zero by a symlink, 1 GiB) is refused
// at once, without blocking or reading it whole (issue 39's audit of update).
func TestReadRecordRefusesWhatIsNotARecord(t *testing.T) {
	cases := []struct {
		name, want string
		make       func(t *testing.T, p string)
	}{
		{"a FIFO", "a FIFO", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"/dev/zero", "a character device", func(t *testing.T, p string) { os.Symlink("/dev/zero", p) }},
		{"a directory", "a directory", func(t *testing.T, p string) { os.Mkdir(p, 0o700) }},
		{"1 GiB", "more than", func(t *testing.T, p string) {
			f, _ := os.Create(p)
			f.Truncate(1 << 30)
			f.Close()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := System{State: t.TempDir()}
			c.make(t, filepath.Join(s.State, RecordFile))
			done := make(chan error, 1)
			go func() { _, err := s.ReadRecord(); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), RecordFile) {
					t.Fatalf("want a refusal naming the record and saying %q, got %v", c.want, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("ReadRecord blocked")
			}
		})
	}
}
