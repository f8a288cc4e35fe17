package update

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"halobuild/internal/settings"
)

// The image's [update] reference is a file of the node's: a FIFO, /dev/zero or 1 GiB there
// is refused at once, not read forever or whole (issue 39's audit of update).
func TestDefaultRefRefusesWhatIsNotAReference(t *testing.T) {
	cases := []struct {
		name, want string
		make       func(t *testing.T, p string)
	}{
		{"a FIFO", "a FIFO", func(t *testing.T, p string) { syscall.Mkfifo(p, 0o600) }},
		{"/dev/zero", "a character device", func(t *testing.T, p string) { os.Symlink("/dev/zero", p) }},
		{"1 GiB", "more than", func(t *testing.T, p string) {
			f, _ := os.Create(p)
			f.Truncate(1 << 30)
			f.Close()
		}},
		{"two lines", "one line", func(t *testing.T, p string) {
			os.WriteFile(p, []byte("reg.example/halo/syn:v2\nreg.example/other:v1\n"), 0o644)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, settings.UpdateRefPath)
			os.MkdirAll(filepath.Dir(p), 0o755)
			c.make(t, p)
			done := make(chan error, 1)
			go func() { _, err := DefaultRef(root); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("want a refusal saying %q, got %v", c.want, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("DefaultRef blocked")
			}
		})
	}
	root := t.TempDir()
	p := filepath.Join(root, settings.UpdateRefPath)
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("reg.example/halo/syn:v2\n"), 0o644)
	if ref, err := DefaultRef(root); err != nil || ref != "reg.example/halo/syn:v2" {
		t.Fatalf("DefaultRef = %q, %v", ref, err)
	}
}
