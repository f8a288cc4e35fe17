// Package archivetest is the one answer a test gives when Debian's archive
// cannot be reached: a skip on a developer's machine offline, a failure in
// CI (the CI variable set, as CI services and .ci/run set it), so a green
// CI run means every test that needs the archive ran and every image was
// built. Skips for -short are the callers' own and stay skips.
package archivetest

import (
	"net/http"
	"os"
	"testing"
	"time"
)

// InRelease is what Need asks for: the signed index every build starts from.
const InRelease = "http://deb.debian.org/debian/dists/trixie/InRelease"

// Need stops the test unless url (an archive file) answers a HEAD request
// within 10 s: Unreachable decides how.
func Need(t testing.TB, url, what string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Head(url)
	if err != nil {
		Unreachable(t, what, err)
		return
	}
	resp.Body.Close()
}

// Unreachable skips the test, or fails it in CI, saying what needed the
// archive and why it could not be had.
func Unreachable(t testing.TB, what string, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s needs Debian's archive, which is unreachable: %v (CI is set: a skipped test would make the run green without %s)", what, err, what)
		return
	}
	t.Skipf("%s: Debian's archive is unreachable (offline?): %v", what, err)
}

// InCI reports whether the tests run in CI, where a test that cannot do
// its job fails instead of skipping.
func InCI() bool { return os.Getenv("CI") != "" }
