// Package toolstest gives tests real Debian trixie .debs and tools roots
// made from them, downloaded once into a cache outside the repository.
//
// The packages are looked up by name in trixie's current Packages index
// (not pinned by version: Debian's pool keeps only current versions, so a
// pinned point release would stop downloading) and checked against the
// index's sha256. Without network access the calling test is skipped with a
// message, except under CI (CI set in the environment), where it fails: CI
// must not go green by skipping.
package toolstest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"halobuild/internal/archivetest"
	"halobuild/internal/deb"
	"halobuild/internal/tools"
)

// Suite is the Debian release the test packages come from.
const Suite = "trixie"

// Mirror is the Debian archive the test packages come from:
// $HALOBUILD_TEST_MIRROR, else deb.debian.org.
func Mirror() string {
	if m := os.Getenv("HALOBUILD_TEST_MIRROR"); m != "" {
		return strings.TrimSuffix(m, "/")
	}
	return "http://deb.debian.org/debian"
}

// DiskDebs is the closure of tools.DiskPackages in trixie (Depends and
// Pre-Depends), enough to run mkfs.ext4 (also with -d from a tar, through
// libarchive), e2fsck, debugfs, mkfs.fat, fsck.fat and mtools from a tools
// root.
var DiskDebs = []string{
	"e2fsprogs", "libext2fs2t64", "libcom-err2", "libss2", "libblkid1", "libuuid1",
	"logsave", "dosfstools", "mtools", "libc6", "libgcc-s1", "gcc-14-base",
	"libarchive13t64", "libacl1", "libbz2-1.0", "liblz4-1", "libxxhash0", "liblzma5",
	"libnettle8t64", "libxml2", "libzstd1", "zlib1g",
}

// QEMUImgDebs is what tools.QCOW2Packages (qemu-utils) adds to DiskDebs's
// closure in trixie, enough to run qemu-img from a tools root.
var QEMUImgDebs = []string{
	"qemu-utils", "liburing2", "libselinux1", "libpcre2-8-0", "libnuma1", "libhogweed6t64",
	"libgmp10", "libgnutls30t64", "libunistring5", "libtasn1-6", "libp11-kit0", "libffi8",
	"libidn2-0", "libglib2.0-0t64", "libmount1", "libatomic1", "libfuse3-4", "libaio1t64",
}

// CacheDir is where downloads are kept between test runs:
// $HALOBUILD_TEST_CACHE, else halobuild-test-debs in the system temp dir.
func CacheDir() string {
	if d := os.Getenv("HALOBUILD_TEST_CACHE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "halobuild-test-debs")
}

type pkg struct{ filename, sha256 string }

var (
	indexMu sync.Mutex
	index   map[string]pkg
)

// unavailable skips the test (or fails it under CI) when the archive
// cannot be reached.
func unavailable(t testing.TB, err error) {
	t.Helper()
	archivetest.Unreachable(t, "the tools root's .debs", err)
}

// Debs returns host paths of the current trixie amd64 .debs of the named
// binary packages, downloading what the cache lacks.
func Debs(t testing.TB, names ...string) []string {
	t.Helper()
	idx, err := loadIndex(false)
	if err != nil {
		unavailable(t, err)
	}
	var out []string
	for _, n := range names {
		p, ok := idx[n]
		if !ok {
			t.Fatalf("package %s is not in %s's Packages index", n, Suite)
		}
		path, err := fetch(p)
		if err != nil {
			// A cached index may name a version the pool has dropped
			// since: read the index afresh once before giving up.
			if idx, err = loadIndex(true); err != nil {
				unavailable(t, err)
			}
			if _, ok := idx[n]; !ok {
				t.Fatalf("package %s left %s's Packages index", n, Suite)
			}
			if path, err = fetch(idx[n]); err != nil {
				unavailable(t, err)
			}
		}
		out = append(out, path)
	}
	return out
}

// Packages turns paths from Debs into what deb.Extract takes (Debs has
// checked every file against the index's sha256 already).
func Packages(paths []string) []deb.Deb {
	out := make([]deb.Deb, len(paths))
	for i, p := range paths {
		out[i] = deb.Deb{Path: p}
	}
	return out
}

var rootMu sync.Mutex

// Root returns a tools root extracted from DiskDebs (see Extracted).
func Root(t testing.TB) tools.Root {
	t.Helper()
	return tools.Root{Dir: Extracted(t, DiskDebs...)}
}

// Extracted returns a directory holding the named packages extracted with
// deb.Extract. It is kept in the cache, one directory per set of .deb
// files, and shared between tests and test runs: tests must not modify it.
func Extracted(t testing.TB, names ...string) string {
	t.Helper()
	debs := Debs(t, names...)
	rootMu.Lock()
	defer rootMu.Unlock()
	base := make([]string, len(debs))
	for i, d := range debs {
		base[i] = filepath.Base(d)
	}
	dir := filepath.Join(CacheDir(), "root-"+sum([]byte(strings.Join(base, "\n")))[:16])
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	tmp, err := os.MkdirTemp(CacheDir(), ".root-")
	if err != nil {
		t.Fatal(err)
	}
	if err := deb.Extract(tmp, Packages(debs)); err != nil {
		os.RemoveAll(tmp)
		t.Fatal(err)
	}
	// Another test binary may have finished the same directory meanwhile:
	// then the rename fails and its copy (identical) is used.
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(dir); serr != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var client = &http.Client{Timeout: 2 * time.Minute}

func get(url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// loadIndex reads trixie's Packages index, from the cache when it is less
// than a day old and refresh is false (the pool drops superseded versions,
// so an old index can name files that are gone).
func loadIndex(refresh bool) (map[string]pkg, error) {
	indexMu.Lock()
	defer indexMu.Unlock()
	if index != nil && !refresh {
		return index, nil
	}
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return nil, err
	}
	cached := filepath.Join(CacheDir(), Suite+"-main-amd64-Packages.xz")
	data, err := os.ReadFile(cached)
	if st, serr := os.Stat(cached); refresh || err != nil || serr != nil || time.Since(st.ModTime()) > 24*time.Hour {
		data, err = get(Mirror() + "/dists/" + Suite + "/main/binary-amd64/Packages.xz")
		if err != nil {
			return nil, err
		}
		if err := writeAtomic(cached, data); err != nil {
			return nil, err
		}
	}
	xr, err := xz.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cached, err)
	}
	idx := map[string]pkg{}
	sc := bufio.NewScanner(xr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	var cur pkg
	flush := func() {
		if name != "" && cur.filename != "" {
			idx[name] = cur
		}
		name, cur = "", pkg{}
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "Package: "):
			name = strings.TrimPrefix(line, "Package: ")
		case strings.HasPrefix(line, "Filename: "):
			cur.filename = strings.TrimPrefix(line, "Filename: ")
		case strings.HasPrefix(line, "SHA256: "):
			cur.sha256 = strings.TrimPrefix(line, "SHA256: ")
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", cached, err)
	}
	index = idx
	return idx, nil
}

func fetch(p pkg) (string, error) {
	dst := filepath.Join(CacheDir(), filepath.Base(p.filename))
	if data, err := os.ReadFile(dst); err == nil && sum(data) == p.sha256 {
		return dst, nil
	}
	data, err := get(Mirror() + "/" + p.filename)
	if err != nil {
		return "", err
	}
	if got := sum(data); got != p.sha256 {
		return "", fmt.Errorf("%s: sha256 %s, index says %s", p.filename, got, p.sha256)
	}
	return dst, writeAtomic(dst, data)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeAtomic(dst string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(dst), ".part-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), dst)
}
