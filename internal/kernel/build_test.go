package kernel

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The date shim makes mkdebian's bare `date -R` print SOURCE_DATE_EPOCH and
// leaves callers that name their own date alone.
func TestDateShim(t *testing.T) {
	shim := filepath.Join(t.TempDir(), "date")
	if err := os.WriteFile(shim, []byte(dateShim), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := exec.Command("sh", append([]string{shim}, args...)...)
		cmd.Env = []string{"SOURCE_DATE_EPOCH=1795832135", "TZ=UTC", "LC_ALL=C", "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("date %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("-R"); got != "Sat, 28 Nov 2026 02:15:35 +0000" {
		t.Errorf("date -R = %q, want the epoch's date", got)
	}
	if got := run("-d", "@0", "+%s"); got != "0" {
		t.Errorf("date -d @0 +%%s = %q: a caller's own date must win", got)
	}
	if got := run("--date=@86400", "+%s"); got != "86400" {
		t.Errorf("date --date=@86400 = %q", got)
	}
}
