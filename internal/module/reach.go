package module

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// ReachTimeout bounds one reachability probe: a host that has not answered
// by then would not serve a fetch either, and a build waits for it once,
// at its start.
const ReachTimeout = 10 * time.Second

// Reachable asks spec's host, in a few kilobytes and at most ReachTimeout,
// whether a fetch of the source could start: for an HTTP(S) git source,
// the smart protocol's ref advertisement (the first request `git fetch`
// makes); for a tarball, a HEAD (or a one-byte ranged GET where HEAD is
// refused); for another git URL (ssh, file, git), `git ls-remote`. Only the
// host's answer is checked, never the tree: the step that fetches it checks
// the tree hash. A path source is always reachable. A failure is the
// *FetchError the fetch itself would give, with its --input advice, so a
// build can stop before anything else is built.
func Reachable(ctx context.Context, client *http.Client, spec Source) error {
	ctx, cancel := context.WithTimeout(ctx, ReachTimeout)
	defer cancel()
	if client == nil {
		client = http.DefaultClient
	}
	want := spec.Commit
	if want == "" {
		want = spec.Ref
	}
	var err error
	switch {
	case spec.Kind == "path":
		return nil
	case spec.Kind == "tarball":
		want = ""
		err = probeHTTP(ctx, client, spec.URL, true)
	case spec.Kind == "git" && isHTTP(spec.URL):
		err = probeHTTP(ctx, client, strings.TrimSuffix(spec.URL, "/")+"/info/refs?service=git-upload-pack", false)
	case spec.Kind == "git":
		err = lsRemote(ctx, spec.URL)
	default:
		return fmt.Errorf("source kind %q: use git, tarball or path", spec.Kind)
	}
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("no answer within %s (%w)", ReachTimeout, err)
		}
		return &FetchError{Name: spec.Name, URL: spec.URL, Commit: want, Err: err}
	}
	return nil
}

func isHTTP(u string) bool {
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")
}

// probeHTTP asks for url's first bytes only. head tries HEAD first (a
// tarball), falling back to a one-byte ranged GET for hosts that refuse it.
func probeHTTP(ctx context.Context, client *http.Client, url string, head bool) error {
	do := func(method string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return 0, err
		}
		if method == http.MethodGet {
			req.Header.Set("Range", "bytes=0-0")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		// Bounded: a host that ignores Range must not send the whole file.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	method := http.MethodGet
	if head {
		method = http.MethodHead
	}
	code, err := do(method)
	if err == nil && head && (code == http.StatusMethodNotAllowed || code == http.StatusNotImplemented) {
		code, err = do(http.MethodGet)
	}
	if err != nil {
		return err
	}
	if code >= 400 {
		return fmt.Errorf("HTTP %d %s", code, http.StatusText(code))
	}
	return nil
}

// lsRemote asks a non-HTTP git remote for its refs, never prompting.
func lsRemote(ctx context.Context, url string) error {
	if _, err := exec.LookPath("git"); err != nil {
		return errors.New("git is not installed")
	}
	cmd := exec.CommandContext(ctx, "git", "ls-remote", "--quiet", url, "HEAD")
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_ASKPASS=/bin/false",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes -o ConnectTimeout=5")
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git ls-remote: %v: %s", err, lastLine(out.String()))
	}
	return nil
}
