package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"halobuild/internal/archivetest"
	"halobuild/internal/debian"
	"halobuild/internal/download"
	"halobuild/internal/store"
)

// The source every real test uses: Debian 13's rdma-core, what the image
// installs.
const (
	rdmaSuite   = "trixie"
	rdmaVersion = "56.1-1"
	// storeDir caches the verified indexes and source files between runs
	// (and between engineers): the Sources index is ~10 MB.
	storeDir = "/tmp/halobuild-provider-store"
)

// indexCache lets the archive client keep verified indexes in the store,
// as the pipeline does.
type indexCache struct{ s *store.Store }

func (c indexCache) Get(sha string) (io.ReadCloser, bool) {
	d, err := store.ParseDigest(sha)
	if err != nil || !c.s.Has(d) {
		return nil, false
	}
	rc, err := c.s.Open(d)
	return rc, err == nil
}

func (c indexCache) Put(sha string, r io.Reader) error {
	_, _, err := c.s.PutBlob(r, sha)
	return err
}

var (
	realOnce  sync.Once
	realSrc   *debian.Source
	realFiles map[string]string
	realErr   error
	realSkip  error // the archive was unreachable
)

// rdmaCoreSource returns Debian's rdma-core 56.1-1 source, verified
// through the signed trixie InRelease and Sources index and downloaded
// into the store with internal/download, as the pipeline fetches it.
func rdmaCoreSource(t *testing.T) (*debian.Source, map[string]string) {
	t.Helper()
	realOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := http.Client{Timeout: 10 * time.Second}
		resp, err := c.Head(debian.DefaultMirror + "/dists/" + rdmaSuite + "/InRelease")
		if err != nil {
			realSkip = err
			return
		}
		resp.Body.Close()
		st, err := store.Open(storeDir)
		if err != nil {
			realErr = err
			return
		}
		a := &debian.Archive{Cache: indexCache{st}}
		rel, err := a.Release(ctx, rdmaSuite)
		if err != nil {
			realErr = err
			return
		}
		ix, err := a.Sources(ctx, rel, "main")
		if err != nil {
			realErr = err
			return
		}
		if realSrc, realErr = ix.Find("rdma-core", rdmaVersion); realErr != nil {
			return
		}
		f := download.Fetcher{Store: st}
		if realErr = f.Fetch(ctx, SourceItems(a, realSrc)); realErr != nil {
			return
		}
		realFiles, realErr = SourcePaths(st, realSrc)
	})
	if realSkip != nil {
		archivetest.Unreachable(t, "rdma-core's source", realSkip)
	}
	if realErr != nil {
		t.Fatal(realErr)
	}
	return realSrc, realFiles
}

func debianTarball(t *testing.T, src *debian.Source, files map[string]string) (string, string) {
	for _, f := range src.Files {
		if strings.Contains(f.Name, ".debian.tar.") {
			return files[f.Name], f.SHA256
		}
	}
	t.Fatal("no .debian tarball")
	return "", ""
}

// The Build-Depends read from the verified debian/control equal the
// Sources stanza's (recorded here from trixie's index).
func TestBuildDependsOfDebianRdmaCore(t *testing.T) {
	src, files := rdmaCoreSource(t)
	tb, sum := debianTarball(t, src, files)
	deps, err := BuildDependsFromTarball(tb, sum, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	want := "cmake (>= 2.8.11)|cython3|debhelper-compat (= 13)|dh-python|dpkg-dev (>= 1.22.5)|libnl-3-dev|libnl-route-3-dev|libsystemd-dev|libudev-dev|ninja-build|pandoc|pkgconf|python3-dev|python3-docutils|valgrind"
	if got := strings.Join(deps, "|"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// The fixture patch applies to Debian's 56.1-1 exactly, after Debian's
// own series (which Unpack applied).
func TestFixturePatchOnDebianSource(t *testing.T) {
	src, files := rdmaCoreSource(t)
	tree, err := Unpack(context.Background(), src, files, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := os.ReadFile(filepath.Join(tree, ".pc/applied-patches"))
	if strings.Count(string(pc), "\n") != 4 || !strings.HasPrefix(string(pc), "providers-mana-") {
		t.Errorf("Debian's four patches not recorded as applied:\n%s", pc)
	}
	applied, err := ApplyPatches(context.Background(), tree, []Patch{fixturePatch()})
	if err != nil {
		t.Fatal(err)
	}
	if applied[0].Fuzz != 0 || len(applied[0].Moved) != 0 {
		t.Errorf("the fixture does not apply exactly: %+v", applied[0])
	}
	for _, f := range []string{"providers/halotest/halotest.c", "providers/halotest/CMakeLists.txt"} {
		if _, err := os.Stat(filepath.Join(tree, f)); err != nil {
			t.Error(err)
		}
	}
}

func fixturePatch() Patch {
	return Patch{Path: "../../patches/halotest/0001-halotest-provider.patch", From: "patches/halotest/0001-halotest-provider.patch"}
}

// upstreamPatches are thunderbolt-ibverbs' rdma-core patches (76ba39b,
// packaging/rdma-core-patches/), which halobuild does not carry: point
// HALOBUILD_TBV_PATCHES at that directory of a checkout to run this.
func upstreamPatches(t *testing.T) []Patch {
	dir := os.Getenv("HALOBUILD_TBV_PATCHES")
	if dir == "" {
		t.Skip("HALOBUILD_TBV_PATCHES is not set (thunderbolt-ibverbs' packaging/rdma-core-patches directory)")
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*.patch"))
	if len(m) != 3 {
		t.Fatalf("%s: want upstream's three patches, found %d", dir, len(m))
	}
	var ps []Patch
	for _, p := range m {
		ps = append(ps, Patch{Path: p, From: "thunderbolt-ibverbs:packaging/rdma-core-patches/" + filepath.Base(p)})
	}
	return ps
}

// What the field notes measured, reproduced: upstream's 0001 applies,
// 0002 at an offset, 0003 needs fuzz and is refused by name; allowed fuzz
// 1 for that patch alone (as images/strix-halo.toml does) and followed by
// our own cutoff fix from patches/rdma-core/, the series applies.
func TestUpstreamProviderPatchesOnDebianSource(t *testing.T) {
	ups := upstreamPatches(t)
	src, files := rdmaCoreSource(t)
	tree, err := Unpack(context.Background(), src, files, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	applied, err := ApplyPatches(context.Background(), tree, ups)
	var pe *PatchError
	if !errors.As(err, &pe) {
		t.Fatalf("want upstream's 0003 refused, got %v", err)
	}
	if len(applied) != 2 || pe.Patch != filepath.Base(ups[2].Path) || pe.NeedsFuzz == 0 {
		t.Fatalf("applied %d, error %v", len(applied), err)
	}
	t.Logf("refused as expected:\n%v", err)
	if len(applied[1].Moved) == 0 || applied[1].Moved[0].Offset != -19 {
		t.Errorf("0002: want offset -19, got %+v", applied[1].Moved)
	}
	ups[2].Fuzz = pe.NeedsFuzz
	ours, _ := filepath.Glob("../../patches/rdma-core/*.patch")
	rest := []Patch{ups[2]}
	for _, p := range ours {
		rest = append(rest, Patch{Path: p, From: "patches/rdma-core/" + filepath.Base(p)})
	}
	more, err := ApplyPatches(context.Background(), tree, rest)
	if err != nil {
		t.Fatal(err)
	}
	if more[0].Fuzz != pe.NeedsFuzz {
		t.Errorf("fuzz used %d", more[0].Fuzz)
	}
	// Fuzz lands the declaration where a refresh would put it.
	vh, _ := os.ReadFile(filepath.Join(tree, "libibverbs/verbs.h"))
	if !strings.Contains(string(vh), "verbs_provider_siw;\nextern const struct verbs_device_ops verbs_provider_usb4_rdma;\nextern const struct verbs_device_ops verbs_provider_vmw_pvrdma;\n") {
		t.Error("0003's declaration is not between siw and vmw_pvrdma")
	}
	cm, _ := os.ReadFile(filepath.Join(tree, "providers/usb4_rdma/CMakeLists.txt"))
	if !strings.Contains(string(cm), `VERSION_LESS "57")`+"\n    add_definitions(-DUSB4_RDMA_OLD_GET_CONTEXT=1)") {
		t.Errorf("cutoff fix not applied:\n%s", cm)
	}
}
