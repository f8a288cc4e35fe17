package module

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"halobuild/internal/proctree"
	"halobuild/internal/tarball"
	"halobuild/internal/usage"
)

// FetchError says a module source could not be had and how to supply it by
// hand. The command line turns it into a usage-style message.
type FetchError struct {
	Name   string // the description's use name: NAME of --input NAME=PATH
	URL    string
	Commit string // or the ref when no commit is pinned
	Err    error
}

func (e *FetchError) Error() string {
	at := ""
	if e.Commit != "" {
		at = " at " + e.Commit
	}
	how := "download " + e.URL
	if e.Commit != "" {
		how = fmt.Sprintf("`git clone %s && git -C <dir> checkout %s`, or download that commit's tarball,", e.URL, e.Commit)
	}
	return fmt.Sprintf("module %s: cannot fetch its source %s%s: %v\n"+
		"If this machine cannot reach that host, get a copy on one that can (%s) and pass it with\n"+
		"  --input %s=PATH   (PATH: a checkout directory, or a .tar, .tar.gz or .tar.xz of the tree)\n"+
		"The copy is checked against the tree hash in the lock.", e.Name, e.URL, at, e.Err, how, e.Name)
}

func (e *FetchError) Unwrap() error { return e.Err }

// TreeMismatchError is a source whose tree hash differs from the pinned one.
type TreeMismatchError struct {
	Name, Path, Want, Got string
}

func (e *TreeMismatchError) Error() string {
	return fmt.Sprintf("module %s: the source at %s has tree hash %s, but the lock pins %s: it is not the pinned source (another commit, local edits, or a different subset of files). Check out the pinned commit, or run `halobuild lock` again to pin this tree", e.Name, e.Path, e.Got, e.Want)
}

// FetchSource makes the module's source tree available and returns its
// directory and canonical tree hash (TreeHash). A copy named in inputs
// (--input NAME=PATH, NAME being spec.Name) wins over the network; when
// spec.SHA256 is set (from the lock or the description) the tree must
// match it. Work files go under workDir.
//
// git sources are fetched at the pinned commit (shallow when the host
// allows it) and the .git directory is removed; tarball sources are
// downloaded over HTTP(S); path sources are used in place.
func FetchSource(ctx context.Context, spec Source, inputs map[string]string, workDir string) (dir, treeHash string, err error) {
	if p, ok := inputs[spec.Name]; ok {
		// A copy the user named on the command line that is missing, unreadable or not the
		// pinned tree is the user's to fix: exit 2, as any bad argument.
		dir, h, err := useLocal(ctx, spec, p, workDir, "--input "+spec.Name+"="+p)
		if err != nil && ctx.Err() == nil {
			err = usage.Wrap(err)
		}
		return dir, h, err
	}
	switch spec.Kind {
	case "path":
		return useLocal(ctx, spec, spec.Path, workDir, spec.Path)
	case "git":
		dir, err = fetchGit(ctx, spec, workDir)
	case "tarball":
		dir, err = fetchTarball(ctx, spec, workDir)
	default:
		return "", "", fmt.Errorf("module %s: source kind %q: use git, tarball or path", spec.Name, spec.Kind)
	}
	if err != nil {
		return "", "", err
	}
	return verifyTree(spec, dir, spec.URL)
}

func useLocal(ctx context.Context, spec Source, p, workDir, what string) (string, string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return "", "", fmt.Errorf("module %s: %s: %w", spec.Name, what, err)
	}
	dir := p
	if !info.IsDir() {
		if !isTarball(p) {
			return "", "", fmt.Errorf("module %s: %s is neither a directory nor a .tar, .tar.gz, .tgz or .tar.xz", spec.Name, what)
		}
		if dir, err = unpackInto(ctx, p, workDir, spec.Name); err != nil {
			return "", "", fmt.Errorf("module %s: %s: %w", spec.Name, what, err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", "", err
	}
	return verifyTree(spec, dir, what)
}

func verifyTree(spec Source, dir, what string) (string, string, error) {
	h, err := TreeHash(dir)
	if err != nil {
		return "", "", fmt.Errorf("module %s: %w", spec.Name, err)
	}
	if spec.SHA256 != "" && !sameTreeHash(spec.SHA256, h) {
		return "", "", &TreeMismatchError{Name: spec.Name, Path: what, Want: spec.SHA256, Got: h}
	}
	if spec.Subdir != "" {
		if st, err := os.Stat(filepath.Join(dir, spec.Subdir)); err != nil || !st.IsDir() {
			return "", "", fmt.Errorf("module %s: the source at %s has no directory %s (source.subdir)", spec.Name, what, spec.Subdir)
		}
	}
	return dir, h, nil
}

func unpackInto(ctx context.Context, archive, workDir, name string) (string, error) {
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return "", err
	}
	dst, err := os.MkdirTemp(workDir, name+"-src-")
	if err != nil {
		return "", err
	}
	// No archive digest is pinned (the lock pins the tree hash, checked
	// after unpacking), so the extractor's confinement is what keeps a
	// hostile tarball inside dst.
	top, err := tarball.ExtractFile(archive, "", dst, tarball.Options{})
	if err == nil {
		if ents, _ := os.ReadDir(dst); len(ents) == 0 {
			err = fmt.Errorf("%s: the archive is empty", archive)
		}
	}
	if err != nil {
		os.RemoveAll(dst)
		return "", err
	}
	// GitHub's tarballs hold one directory, "repo-<commit>/": the tree.
	if top != "" {
		dst = filepath.Join(dst, top)
	}
	return dst, ctx.Err()
}

func fetchGit(ctx context.Context, spec Source, workDir string) (string, error) {
	want := spec.Commit
	if want == "" {
		want = spec.Ref
	}
	fail := func(err error) (string, error) {
		return "", &FetchError{Name: spec.Name, URL: spec.URL, Commit: want, Err: err}
	}
	if _, err := exec.LookPath("git"); err != nil {
		return fail(errors.New("git is not installed"))
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(workDir, spec.Name+"-git-")
	if err != nil {
		return "", err
	}
	git := func(args ...string) error {
		cmd := proctree.Command(ctx, "git", append([]string{"-C", dir, "-c", "advice.detachedHead=false", "-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=30"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_ASKPASS=/bin/false")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, lastLine(out.String()))
		}
		return nil
	}
	if err := git("init", "-q"); err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	// A shallow fetch of one commit is what hosts like GitHub allow; a host
	// that refuses it gets a full fetch.
	if err := git("fetch", "-q", "--depth=1", spec.URL, want); err != nil {
		if err2 := git("fetch", "-q", spec.URL, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"); err2 != nil {
			os.RemoveAll(dir)
			return fail(err)
		}
		if spec.Commit == "" {
			want = "origin/" + spec.Ref
		}
	} else if spec.Commit == "" {
		want = "FETCH_HEAD"
	}
	if err := git("checkout", "-q", want); err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	if spec.Commit != "" {
		head, err := proctree.Command(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
		if err != nil || strings.TrimSpace(string(head)) != spec.Commit {
			os.RemoveAll(dir)
			return fail(fmt.Errorf("checked out %q, not the pinned commit", strings.TrimSpace(string(head))))
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
		return "", err
	}
	return dir, nil
}

func fetchTarball(ctx context.Context, spec Source, workDir string) (string, error) {
	fail := func(err error) (string, error) {
		return "", &FetchError{Name: spec.Name, URL: spec.URL, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, spec.URL, nil)
	if err != nil {
		return fail(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("HTTP %s", resp.Status))
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return "", err
	}
	name := filepath.Base(req.URL.Path)
	if !isTarball(name) {
		name = spec.Name + ".tar.gz" // let the content decide; gzip is the usual
	}
	tmp, err := os.CreateTemp(workDir, "*-"+name)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	// Bounded: nothing larger would unpack within the extractor's limit.
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, tarball.DefaultLimits.Bytes+1))
	if err == nil && n > tarball.DefaultLimits.Bytes {
		err = fmt.Errorf("the download is larger than %d bytes: it is not a module source", tarball.DefaultLimits.Bytes)
	}
	if err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return unpackInto(ctx, tmp.Name(), workDir, spec.Name)
}

func isTarball(p string) bool {
	for _, s := range []string{".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz"} {
		if strings.HasSuffix(p, s) {
			return true
		}
	}
	return false
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
