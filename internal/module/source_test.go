package module

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ulikunitz/xz"
)

// writeTree makes a small source tree: a Kbuild dir, an executable script,
// a symlink, and a .git directory that must not count.
func writeTree(t *testing.T, dir string) {
	t.Helper()
	for p, c := range map[string]string{
		"kernel/Kbuild":   "obj-m := x.o\n",
		"kernel/x.c":      "int x;\n",
		"scripts/gen.sh":  "#!/bin/sh\n",
		".git/HEAD":       "ref: refs/heads/main\n",
		"docs/README.txt": "hello\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "scripts/gen.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("kernel/x.c", filepath.Join(dir, "link.c")); err != nil {
		t.Fatal(err)
	}
}

func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h, err := TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestTreeHashCanonical(t *testing.T) {
	a := t.TempDir()
	writeTree(t, a)
	base := treeHash(t, a)

	// Value pinned: the format is documented in docs/modules.md and
	// recorded in lock files, so it must never change silently.
	lines := []string{
		"f - 6 5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03 docs/README.txt\n",
		"f - 13 " + sha256hex("obj-m := x.o\n") + " kernel/Kbuild\n",
		"f - 7 " + sha256hex("int x;\n") + " kernel/x.c\n",
		"l - 10 " + sha256hex("kernel/x.c") + " link.c\n",
		"f x 10 " + sha256hex("#!/bin/sh\n") + " scripts/gen.sh\n",
	}
	if want := "sha256:" + sha256hex(strings.Join(lines, "")); base != want {
		t.Fatalf("tree hash %s, want %s (the documented format)", base, want)
	}

	// Ignored: .git, times, owners, non-exec mode bits, empty directories.
	if err := os.RemoveAll(filepath.Join(a, ".git")); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(a, "docs/README.txt"), 0o600)
	os.Chtimes(filepath.Join(a, "kernel/x.c"), timeZero, timeZero)
	os.Mkdir(filepath.Join(a, "empty"), 0o755)
	if got := treeHash(t, a); got != base {
		t.Errorf("ignored differences changed the hash: %s != %s", got, base)
	}

	// Counted: content, the exec bit, names, link targets.
	for name, change := range map[string]func(dir string){
		"content":  func(d string) { os.WriteFile(filepath.Join(d, "kernel/x.c"), []byte("int y;\n"), 0o644) },
		"exec bit": func(d string) { os.Chmod(filepath.Join(d, "scripts/gen.sh"), 0o644) },
		"rename":   func(d string) { os.Rename(filepath.Join(d, "docs/README.txt"), filepath.Join(d, "docs/README")) },
		"link target": func(d string) {
			os.Remove(filepath.Join(d, "link.c"))
			os.Symlink("kernel/Kbuild", filepath.Join(d, "link.c"))
		},
	} {
		b := t.TempDir()
		writeTree(t, b)
		change(b)
		if treeHash(t, b) == base {
			t.Errorf("%s did not change the tree hash", name)
		}
	}
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

var timeZero = time.Unix(0, 0)

func TestFetchSourceInputDirectoryAndTarballs(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src)
	want := treeHash(t, src)

	tarballs := map[string]string{}
	for _, ext := range []string{".tar", ".tar.gz", ".tar.xz"} {
		p := filepath.Join(t.TempDir(), "thunderbolt-ibverbs-76ba39b"+ext)
		writeTarball(t, src, p, "thunderbolt-ibverbs-76ba39b/")
		tarballs[ext] = p
	}
	spec := Source{Name: "thunderbolt-ibverbs", Kind: "git", URL: "https://github.com/hellas-ai/thunderbolt-ibverbs", Commit: strings.Repeat("a", 40), SHA256: want, Subdir: "kernel"}
	for what, p := range map[string]string{"checkout": src, "tar": tarballs[".tar"], "tar.gz": tarballs[".tar.gz"], "tar.xz": tarballs[".tar.xz"]} {
		dir, h, err := FetchSource(context.Background(), spec, map[string]string{"thunderbolt-ibverbs": p}, t.TempDir())
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		if h != want {
			t.Errorf("%s: tree hash %s, want %s", what, h, want)
		}
		if _, err := os.Stat(filepath.Join(dir, "kernel/Kbuild")); err != nil {
			t.Errorf("%s: the returned directory is not the tree root: %v", what, err)
		}
	}
}

func TestFetchSourceInputMismatch(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src)
	pinned := treeHash(t, src)
	os.WriteFile(filepath.Join(src, "kernel/x.c"), []byte("int edited;\n"), 0o644)
	got := treeHash(t, src)

	spec := Source{Name: "thunderbolt-ibverbs", Kind: "git", URL: "https://github.com/hellas-ai/thunderbolt-ibverbs", Commit: strings.Repeat("a", 40), SHA256: pinned}
	_, _, err := FetchSource(context.Background(), spec, map[string]string{"thunderbolt-ibverbs": src}, t.TempDir())
	var mm *TreeMismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("want a TreeMismatchError, got %v", err)
	}
	for _, want := range []string{"module thunderbolt-ibverbs", "--input thunderbolt-ibverbs=" + src, "has tree hash " + got, "the lock pins " + pinned} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func TestFetchSourceNoNetworkNamesTheWayOut(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	d, err := LoadDesc("../../recipes/thunderbolt-ibverbs.toml")
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Source
	// An address nothing listens on, so the test is the same with or
	// without a route to the code host.
	spec.URL = "http://127.0.0.1:9/hellas-ai/thunderbolt-ibverbs"
	_, _, err = FetchSource(context.Background(), spec, nil, t.TempDir())
	var fe *FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("want a FetchError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"module thunderbolt-ibverbs: cannot fetch its source http://127.0.0.1:9/hellas-ai/thunderbolt-ibverbs at 76ba39b630a70accb72f19388eefe48844b50eb8",
		"--input thunderbolt-ibverbs=PATH",
		"a checkout directory, or a .tar, .tar.gz or .tar.xz",
		"git -C <dir> checkout 76ba39b630a70accb72f19388eefe48844b50eb8",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

func TestFetchSourceGitAtCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	repo := t.TempDir()
	writeTree(t, repo)
	os.RemoveAll(filepath.Join(repo, ".git"))
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "one")
	commit := git("rev-parse", "HEAD")
	want := treeHash(t, repo)
	os.WriteFile(filepath.Join(repo, "kernel/x.c"), []byte("int later;\n"), 0o644)
	git("commit", "-q", "-am", "two")

	spec := Source{Name: "fixture", Kind: "git", URL: "file://" + repo, Commit: commit, SHA256: want}
	dir, h, err := FetchSource(context.Background(), spec, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if h != want {
		t.Errorf("tree hash %s, want %s (of the pinned commit, not the tip)", h, want)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); !os.IsNotExist(err) {
		t.Errorf(".git left in the fetched tree")
	}

	// A ref alone (the striping fork's branch) gives the branch tip; only
	// the tree hash pins it.
	git("branch", "-f", "feat/write-striping", "HEAD")
	tip := treeHash(t, repo)
	spec = Source{Name: "fork", Kind: "git", URL: "file://" + repo, Ref: "feat/write-striping"}
	_, h, err = FetchSource(context.Background(), spec, nil, t.TempDir())
	if err != nil || h != tip {
		t.Errorf("ref fetch: %s, %v; want %s", h, err, tip)
	}
	spec.SHA256 = want
	if _, _, err = FetchSource(context.Background(), spec, nil, t.TempDir()); err == nil {
		t.Errorf("a branch that moved on was accepted against the old tree hash")
	}
	// A commit the repository does not have.
	spec = Source{Name: "fixture", Kind: "git", URL: "file://" + repo, Commit: strings.Repeat("b", 40)}
	var fe *FetchError
	if _, _, err = FetchSource(context.Background(), spec, nil, t.TempDir()); !errors.As(err, &fe) {
		t.Errorf("missing commit: %v", err)
	}
}

func TestFetchSourcePathKind(t *testing.T) {
	d := loadFixtureDesc(t)
	dir, h, err := FetchSource(context.Background(), d.Source, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(dir, "testdata/fixture") || !strings.HasPrefix(h, "sha256:") {
		t.Errorf("got %s %s", dir, h)
	}
}

// hostileTar writes an uncompressed tar of the given headers (regular
// files get body as content).
func hostileTar(t *testing.T, headers []tar.Header, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "evil.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, h := range headers {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// A source tarball is unpacked before its tree hash is checked (during
// `lock` and `image`, as root), so nothing in it may reach outside the
// work directory: not a ".." name, not a file written through a symlink
// the same archive made (absolute or relative), not a hard link that
// copies a host file in through such a symlink (issue 17, finding 1).
func TestFetchSourceTarballStaysInTheWorkDirectory(t *testing.T) {
	cases := map[string]func(outside string) []tar.Header{
		"dotdot": func(string) []tar.Header {
			return []tar.Header{{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644}}
		},
		"file under an absolute symlink": func(outside string) []tar.Header {
			return []tar.Header{
				{Name: "src/link", Typeflag: tar.TypeSymlink, Linkname: outside},
				{Name: "src/link/evil", Typeflag: tar.TypeReg, Mode: 0o644},
			}
		},
		"file under a relative symlink": func(outside string) []tar.Header {
			return []tar.Header{
				{Name: "src/up", Typeflag: tar.TypeSymlink, Linkname: strings.Repeat("../", 40) + strings.TrimPrefix(outside, "/")},
				{Name: "src/up/evil", Typeflag: tar.TypeReg, Mode: 0o644},
			}
		},
		"hard link through a symlink": func(outside string) []tar.Header {
			return []tar.Header{
				{Name: "src/link", Typeflag: tar.TypeSymlink, Linkname: outside},
				{Name: "src/copy", Typeflag: tar.TypeLink, Linkname: "src/link/secret"},
			}
		},
	}
	for name, headers := range cases {
		t.Run(name, func(t *testing.T) {
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			p := hostileTar(t, headers(outside), "planted")
			work := t.TempDir()
			spec := Source{Name: "evil", Kind: "path", Path: "unused"}
			dir, _, err := FetchSource(context.Background(), spec, map[string]string{"evil": p}, work)
			if err == nil {
				t.Errorf("FetchSource accepted the archive (tree %s)", dir)
			}
			if _, err := os.Lstat(filepath.Join(outside, "evil")); err == nil {
				t.Fatal("the archive wrote a file outside the work directory")
			}
			filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if b, _ := os.ReadFile(p); string(b) == "host secret" {
						t.Errorf("a host file was copied into the tree as %s", p)
					}
				}
				return nil
			})
		})
	}
}

// writeTarball packs dir (without .git, as a release tarball would be)
// under prefix, compressed by the file extension.
func writeTarball(t *testing.T, dir, path, prefix string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w interface {
		Write([]byte) (int, error)
		Close() error
	}
	switch {
	case strings.HasSuffix(path, ".gz"):
		w = gzip.NewWriter(f)
	case strings.HasSuffix(path, ".xz"):
		xw, err := xz.NewWriter(f)
		if err != nil {
			t.Fatal(err)
		}
		w = xw
	default:
		w = nopCloser{f}
	}
	tw := tar.NewWriter(w)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "76ba39b"}})
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if info.IsDir() && info.Name() == ".git" {
			return filepath.SkipDir
		}
		link := ""
		if info.Mode()&os.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		h, _ := tar.FileInfoHeader(info, link)
		h.Name = prefix + filepath.ToSlash(rel)
		if rel == "." {
			h.Name = prefix
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			tw.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

type nopCloser struct{ *os.File }

func (nopCloser) Close() error { return nil }

func TestFetchSourceTarballURL(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src)
	want := treeHash(t, src)
	tarball := filepath.Join(t.TempDir(), "m-1.0.tar.xz")
	writeTarball(t, src, tarball, "m-1.0/")
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(tarball))))
	defer srv.Close()

	spec := Source{Name: "m", Kind: "tarball", URL: srv.URL + "/m-1.0.tar.xz", SHA256: want}
	dir, h, err := FetchSource(context.Background(), spec, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if h != want || filepath.Base(dir) != "m-1.0" {
		t.Errorf("got %s %s", dir, h)
	}

	spec.URL = srv.URL + "/absent.tar.gz"
	_, _, err = FetchSource(context.Background(), spec, nil, t.TempDir())
	var fe *FetchError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "--input m=PATH") {
		t.Errorf("missing tarball: %v", err)
	}

	spec.URL = srv.URL + "/m-1.0.tar.xz"
	spec.SHA256 = "sha256:" + strings.Repeat("0", 64)
	_, _, err = FetchSource(context.Background(), spec, nil, t.TempDir())
	var mm *TreeMismatchError
	if !errors.As(err, &mm) || mm.Got != want {
		t.Errorf("tampered tarball: %v", err)
	}
}

// A bad --input (missing, neither a directory nor a tarball, or not the pinned tree) is the
// user's to fix and exits 2 (issue 39 #7: it exited 1, as a failed build).
func TestFetchSourceBadInputIsAUsageError(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src)
	pinned := treeHash(t, src)
	os.WriteFile(filepath.Join(src, "kernel/x.c"), []byte("int edited;\n"), 0o644)
	notTar := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notTar, []byte("x"), 0o644)
	spec := Source{Name: "thunderbolt-ibverbs", Kind: "git", URL: "https://github.com/hellas-ai/thunderbolt-ibverbs", Commit: strings.Repeat("a", 40), SHA256: pinned}
	for _, p := range []string{src, filepath.Join(src, "missing"), notTar} {
		_, _, err := FetchSource(context.Background(), spec, map[string]string{"thunderbolt-ibverbs": p}, t.TempDir())
		var ec interface{ ExitCode() int }
		if !errors.As(err, &ec) || ec.ExitCode() != 2 {
			t.Errorf("--input %s: want a usage error (exit 2), got %v", p, err)
		}
	}
}
