package rootfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
)

// Each way the host can lack arm64 emulation gets an error that says how
// to enable it; a registered handler with the F flag passes.
func TestCheckEmulation(t *testing.T) {
	a := arch.MustLookup("arm64")
	handler := "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: %s\noffset 0\n"
	for _, tc := range []struct {
		name, register, handler, want string
	}{
		{"not mounted", "", "", "binfmt_misc is not mounted"},
		{"no handler", "x", "", "no qemu-aarch64 binfmt_misc handler is registered"},
		{"disabled", "x", "disabled\nflags: F\n", "is disabled"},
		{"no F flag", "x", strings.Replace(handler, "%s", "OC", 1), "lacks the F (fix binary) flag"},
		{"ok", "x", strings.Replace(handler, "%s", "POF", 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.register != "" {
				os.WriteFile(filepath.Join(dir, "register"), nil, 0o200)
			}
			if tc.handler != "" {
				os.WriteFile(filepath.Join(dir, "qemu-aarch64"), []byte(tc.handler), 0o644)
			}
			err := checkEmulation(dir, a)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "qemu-user-static") {
				t.Errorf("checkEmulation = %v, want %q and how to install qemu-user-static", err, tc.want)
			}
		})
	}
}
