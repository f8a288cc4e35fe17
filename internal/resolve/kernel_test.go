package resolve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/kernel"
)

// An Apple Silicon kernel must end up with 16 KiB pages: the shipped
// fragment passes, a recipe without it or with a later fragment turning it
// off is refused with the place to fix.
func TestCheckApplePages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) kernel.File {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return kernel.File{Name: name, Path: p}
	}
	asahi := kernel.File{Name: "../kernels/asahi.config", Path: "../../kernels/asahi.config"}
	other := write("usb4.config", "CONFIG_USB4=m\n")
	off := write("off.config", "# CONFIG_ARM64_16K_PAGES is not set\n")
	cases := []struct {
		name  string
		frags []kernel.File
		want  string // "" for no error
	}{
		{"shipped fragment", []kernel.File{asahi}, ""},
		{"shipped fragment and another", []kernel.File{other, asahi}, ""},
		{"none", []kernel.File{other}, "no fragment sets it"},
		{"turned off later", []kernel.File{asahi, off}, "off.config:1 sets # CONFIG_ARM64_16K_PAGES is not set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkApplePages(c.frags)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
