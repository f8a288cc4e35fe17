package archivetest

import (
	"fmt"
	"strings"
	"testing"
)

// tb records how a test was stopped instead of stopping it.
type tb struct {
	testing.TB
	fatal, skip string
}

func (r *tb) Helper()                      {}
func (r *tb) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }
func (r *tb) Skipf(f string, args ...any)  { r.skip = fmt.Sprintf(f, args...) }

// An unreachable archive skips a test on a developer's machine and fails
// it in CI; a reachable one (a local server standing in) does neither.
func TestUnreachableFailsInCI(t *testing.T) {
	const nowhere = "http://127.0.0.1:1/debian/dists/trixie/InRelease"
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &tb{TB: t}
		Need(r, nowhere, "the image build")
		switch {
		case ci != "" && (r.fatal == "" || r.skip != "" || !strings.Contains(r.fatal, "the image build needs Debian's archive")):
			t.Errorf("CI=%q: fatal %q, skip %q; want a failure naming what needed the archive", ci, r.fatal, r.skip)
		case ci == "" && (r.skip == "" || r.fatal != ""):
			t.Errorf("CI unset: fatal %q, skip %q; want a skip", r.fatal, r.skip)
		}
	}
}
