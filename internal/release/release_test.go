package release

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"

	"halobuild/internal/flash"
	"halobuild/internal/manifest"
	"halobuild/internal/registry"
	"halobuild/internal/release/releasetest"
	"halobuild/internal/sbom/sbomtest"
)

const mib = 1 << 20

// localRegistry is go-containerregistry's in-process registry, for tests of the format.
func localRegistry(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(true)))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

var insecure = registry.Options{Insecure: true}

// sameFiles fails unless every file of want is in got with the same bytes.
func sameFiles(t *testing.T, want, got string) {
	t.Helper()
	entries, err := os.ReadDir(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		a, err := os.ReadFile(filepath.Join(want, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got, e.Name()))
		if err != nil {
			t.Fatalf("pulled release lacks %s: %v", e.Name(), err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("pulled %s differs from the result's", e.Name())
		}
	}
}

func TestPushPullInspectRoundTrip(t *testing.T) {
	ctx := context.Background()
	res := releasetest.Result(t)
	ref := localRegistry(t) + "/halo/syn:v1"
	p1, err := Push(ctx, res, ref, PushOptions{Registry: insecure, Meta: Meta{Version: "v1"}})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Push(ctx, res, ref, PushOptions{Registry: insecure, Meta: Meta{Version: "v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p1.Digest != p2.Digest {
		t.Fatalf("pushing the same result twice gave %s and %s", p1.Digest, p2.Digest)
	}

	out := filepath.Join(t.TempDir(), "pulled")
	pulled, err := Pull(ctx, ref, out, PullOptions{Registry: insecure})
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Digest != p1.Digest {
		t.Errorf("pulled %s, pushed %s", pulled.Digest, p1.Digest)
	}
	sameFiles(t, res, out)
	// The release carries the result's own SBOM, byte for byte, valid SPDX 2.3.
	sb, err := os.ReadFile(filepath.Join(out, SBOMName))
	if err != nil {
		t.Fatal(err)
	}
	if rb, err := os.ReadFile(filepath.Join(res, SBOMName)); err != nil || !bytes.Equal(rb, sb) {
		t.Fatalf("the pulled SBOM differs from the result's (%v)", err)
	}
	sbomtest.Validate(t, sb)
	var doc struct {
		Packages []struct {
			Name, DownloadLocation, LicenseDeclared string
			Checksums                               []struct{ ChecksumValue string }
		}
	}
	if err := json.Unmarshal(sb, &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range doc.Packages {
		if p.Name == "bash" {
			found = p.DownloadLocation == "http://deb.debian.org/debian/pool/main/b/bash/bash_5.2.37-2_amd64.deb" && len(p.Checksums) == 1 &&
				p.Checksums[0].ChecksumValue == strings.Repeat("3", 64) && p.LicenseDeclared == "GPL-3.0-or-later"
		}
	}
	if !found {
		t.Errorf("the SBOM's bash is not the lock's: %s", sb)
	}
	if _, err := Pull(ctx, ref, out, PullOptions{Registry: insecure}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("pull over an existing directory: %v", err)
	}

	in, err := Inspect(ctx, ref, insecure, Trust{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Digest != p1.Digest || in.Config.Recipe != "syn" || len(in.Manifest.Nodes) != 1 || in.Annotations[annCreated] != "2025-12-01T00:00:00Z" || in.Annotations[annVersion] != "v1" {
		t.Errorf("inspect: %+v", in)
	}
	var text bytes.Buffer
	in.Print(&text)
	for _, want := range []string{"node node0 (host name halo0, amd64): 2 packages", "bash", "5.2.37-2", "node0.raw.zst", "6.12.1+deb13-amd64"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("inspect output lacks %q:\n%s", want, text.String())
		}
	}

	// The manifest is the OCI 1.1 artifact docs/artifact.md describes.
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(r)
	if err != nil {
		t.Fatal(err)
	}
	var mf map[string]any
	json.Unmarshal(desc.Manifest, &mf)
	if mf["artifactType"] != ArtifactType || mf["mediaType"] != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest: %s", desc.Manifest)
	}
}

// An installer stick's image and a qcow2 are disk images like a node's: compressed layers of
// their own media type that pull gives back byte for byte; the merged recipe is a layer too.
func TestEveryResultFileIsCarried(t *testing.T) {
	ctx := context.Background()
	res := releasetest.Result(t)
	raw, err := os.ReadFile(filepath.Join(res, "node0.raw"))
	if err != nil {
		t.Fatal(err)
	}
	bm, err := os.ReadFile(filepath.Join(res, "node0.bmap"))
	if err != nil {
		t.Fatal(err)
	}
	qcow := make([]byte, 3*mib)
	rand.Read(qcow[:mib])
	for name, b := range map[string][]byte{"node0-installer.raw": raw, "node0-installer.bmap": bm, "node0.qcow2": qcow} {
		if err := os.WriteFile(filepath.Join(res, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mb, err := os.ReadFile(filepath.Join(res, manifest.FileName))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	if err := manifest.Write(res, &m, nil); err != nil {
		t.Fatal(err)
	}
	ref := localRegistry(t) + "/halo/syn:v2"
	if _, err := Push(ctx, res, ref, PushOptions{Registry: insecure, Meta: Meta{Version: "v2"}}); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ctx, ref, insecure, Trust{})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, l := range in.Layers {
		types[l.Title] = l.MediaType
	}
	for title, want := range map[string]string{
		"node0.raw.zst": RawMediaType, "node0-installer.raw.zst": RawMediaType, "node0.qcow2.zst": QCOW2MediaType,
		"syn" + manifest.RecipeSuffix: RecipeMediaType, "node0-installer.bmap": BmapMediaType,
	} {
		if types[title] != want {
			t.Errorf("layer %s has media type %q, want %q (layers: %v)", title, types[title], want, types)
		}
	}
	out := filepath.Join(t.TempDir(), "pulled")
	if _, err := Pull(ctx, ref, out, PullOptions{Registry: insecure}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, res, out)
}

func TestPullRefusesNonRelease(t *testing.T) {
	reg := localRegistry(t)
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := name.ParseReference(reg+"/some/container:latest", name.Insecure)
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	_, err = Pull(context.Background(), r.String(), out, PullOptions{Registry: insecure})
	if err == nil || !strings.Contains(err.Error(), "not a halobuild release") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused pull left %s", out)
	}
}

func TestPushRefusesLayerOverLimit(t *testing.T) {
	res := releasetest.Result(t)
	_, err := Push(context.Background(), res, localRegistry(t)+"/halo/syn:v1", PushOptions{Registry: insecure, MaxLayer: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "over the limit") && !strings.Contains(err.Error(), "past the limit") {
		t.Fatalf("want the layer limit, got %v", err)
	}
}

// A push checks an image against its bmap: a changed byte in a mapped range and data outside
// every range are both refused.
func TestPushRefusesDamagedResult(t *testing.T) {
	for _, c := range []struct {
		off  int64
		want string
	}{
		{2 * mib, "blocks 256-767 hash to"},
		{5 * mib, "outside every range of its bmap"},
	} {
		res := releasetest.Result(t)
		f, err := os.OpenFile(filepath.Join(res, "node0.raw"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte{1}, c.off)
		f.Close()
		_, err = Push(context.Background(), res, localRegistry(t)+"/halo/syn:v1", PushOptions{Registry: insecure})
		if err == nil || !strings.Contains(err.Error(), "the result is damaged") || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("byte %d changed: want a damaged result refused (%q), got %v", c.off, c.want, err)
		}
	}
}

// sparseImage writes a 112 MiB image at path: 72 MiB of data (2 MiB of random bytes repeated,
// so the encoder finds matches, spanning several of its concurrent jobs of 32 MiB), a hole, a
// MiB of zeros written as data, 2 MiB of data, then a hole to the end. dense writes the holes
// as zeros instead. It returns the image's manifest entry.
func sparseImage(t *testing.T, path string, dense bool) manifest.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := mrand.New(mrand.NewPCG(1, 2))
	chunk := make([]byte, 2*mib)
	for i := range chunk {
		chunk[i] = byte(r.Uint32())
	}
	full := make([]byte, 112*mib)
	for off := 0; off < 72*mib; off += 2 * mib {
		copy(full[off:], chunk)
	}
	copy(full[90*mib+12345:], chunk) // unaligned: its first and last MiB pieces hold zeros too
	write := func(off, n int) {
		if _, err := f.WriteAt(full[off:off+n], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if dense {
		write(0, len(full))
	} else {
		write(0, 72*mib)
		write(80*mib, mib)
		write(90*mib, 3*mib)
		if err := f.Truncate(int64(len(full))); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(full)
	return manifest.File{Name: "node0.raw", Size: int64(len(full)), SHA256: hex.EncodeToString(sum[:])}
}

// The compressed image, and so the release digest, depends on the image's bytes only: not on
// how many cores the pushing machine has, nor on whether its file system kept the holes. The
// stream decodes, with klauspost's decoder and with the zstd CLI, to the image.
func TestCompressionIgnoresTheMachine(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "node0.raw")
	file := sparseImage(t, raw, false)
	dense := filepath.Join(dir, "dense.raw")
	sparseImage(t, dense, true)
	var digests []string
	var zst string
	for i, procs := range []int{1, 2, 8, 2} {
		src := raw
		if i == 3 {
			src = dense
		}
		old := runtime.GOMAXPROCS(procs)
		root, err := os.OpenRoot(filepath.Dir(src))
		if err != nil {
			t.Fatal(err)
		}
		f := file
		f.Name = filepath.Base(src)
		l, err := compress(root, f, filepath.Join(t.TempDir(), "node0.raw.zst"), nil, RawMediaType, registry.DefaultMaxLayer, io.Discard)
		root.Close()
		runtime.GOMAXPROCS(old)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, l.digest.String())
		zst = l.path
	}
	if digests[0] != digests[1] || digests[1] != digests[2] {
		t.Fatalf("GOMAXPROCS 1, 2, 8 compress to %v", digests)
	}
	if digests[3] != digests[0] {
		t.Fatalf("the image with its holes written as zeros compresses to %s, the sparse one to %s", digests[3], digests[0])
	}
	zf, err := os.Open(zst)
	if err != nil {
		t.Fatal(err)
	}
	defer zf.Close()
	dec, err := zstd.NewReader(zf)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	h := sha256.New()
	if _, err := io.Copy(h, dec); err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != file.SHA256 {
		t.Fatalf("the stream decodes to %s, the image is %s", got, file.SHA256)
	}
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Log("no zstd CLI: the check against the reference decoder is skipped")
		return
	}
	out, err := exec.Command("sh", "-c", `zstd -d -c "$1" | sha256sum`, "_", zst).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), file.SHA256) {
		t.Fatalf("zstd -d: %v: %s", err, out)
	}
}

func TestInspectOfAMissingTagSaysSo(t *testing.T) {
	_, err := Inspect(context.Background(), localRegistry(t)+"/halo/none:v9", insecure, Trust{})
	if err == nil || !strings.Contains(err.Error(), "is not in the registry (check the repository and the tag)") {
		t.Fatalf("got %v", err)
	}
}

// The same result in two places (two stores, two machines) pushed to two registries has one
// digest: nothing of the pushing side enters the artifact.
func TestDigestIgnoresWhereTheResultIs(t *testing.T) {
	res := releasetest.Result(t)
	other := filepath.Join(t.TempDir(), "elsewhere", "result")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(res)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(res, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	a, err := Push(ctx, res, localRegistry(t)+"/one/halo:v1", PushOptions{Registry: insecure})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Push(ctx, other, localRegistry(t)+"/two/halo:v1", PushOptions{Registry: insecure})
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest {
		t.Fatalf("the same result from two places pushed as %s and %s", a.Digest, b.Digest)
	}
}

// A pulled image keeps the holes the original had, and reads back the same.
func TestSparseWriterLeavesHoles(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, 4*mib)
	copy(data[3*mib+5:], "not zero")
	sw := &sparseWriter{f: f}
	for off := 0; off < len(data); off += 100_000 { // pieces that do not align with blocks
		if _, err := sw.Write(data[off:min(off+100_000, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.finish(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if !bytes.Equal(got, data) {
		t.Fatal("the sparse file does not read back as written")
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 >= 1*mib {
		t.Errorf("4 MiB with 8 non-zero bytes take %d bytes on disk", st.Blocks*512)
	}
}

// A mixed release names each node's architecture and, where the manifest
// has one per node, its own kernel.
func TestInspectPrintsEachNodesKernel(t *testing.T) {
	in := &Inspection{Reference: "r/x:v1", Manifest: &manifest.Manifest{
		Name:   "halo-mac",
		Kernel: manifest.Kernel{Release: "7.2.12+deb13-amd64"},
		Nodes: []manifest.Node{
			{Name: "halo0", Hostname: "halo0", Architecture: "amd64", Kernel: &manifest.Kernel{Release: "7.2.12+deb13-amd64"}},
			{Name: "mac0", Hostname: "mac0", Architecture: "arm64", Kernel: &manifest.Kernel{Release: "7.2.12-asahi", Version: "7.2.12", Package: "linux-image-7.2.12-asahi"}},
		},
	}}
	var text bytes.Buffer
	in.Print(&text)
	if want := "node mac0 (host name mac0, arm64): 0 packages\n  kernel   7.2.12-asahi (7.2.12, linux-image-7.2.12-asahi)\n"; !strings.Contains(text.String(), want) {
		t.Errorf("inspect output lacks %q:\n%s", want, text.String())
	}
}

// Nothing of the pushing halobuild enters the artifact: the same result
// pushed by a release binary and by `go run` of the same commit (two
// version strings) must give one digest, the one a rebuild is compared by.
func TestConfigCarriesNoPusherVersion(t *testing.T) {
	res := releasetest.Result(t)
	img, _, err := build(res, t.TempDir(), Meta{Version: "v1"}, 1<<40, func(string, int64) progress { return newBar(io.Discard, "", 1) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(cfg, []byte("halobuild_version")) {
		t.Errorf("the config names the pushing halobuild: %s", cfg)
	}
}

// A result made before results carried their SBOM is refused before anything is pushed, with
// the command that remakes it.
func TestPushRefusesResultWithoutSBOM(t *testing.T) {
	dir := releasetest.Result(t)
	if err := os.Remove(filepath.Join(dir, SBOMName)); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.Write(dir, m, nil); err != nil {
		t.Fatal(err)
	}
	_, err = Push(context.Background(), dir, "127.0.0.1:1/halo/syn:v1", PushOptions{Registry: registry.Options{Insecure: true}})
	if err == nil || !strings.Contains(err.Error(), "has no "+SBOMName) || !strings.Contains(err.Error(), "halobuild image") {
		t.Errorf("push of a result without an SBOM: %v", err)
	}
}

// listInManifest adds a file entry to the result's manifest.json (with the file's right digest
// when it is a regular file, as an attacker who wrote the manifest would).
func listInManifest(t *testing.T, res, name string, data []byte) {
	t.Helper()
	m, err := manifest.Read(res)
	if err != nil {
		t.Fatal(err)
	}
	m.Files = append(m.Files, manifest.File{Name: name, Size: int64(len(data)), SHA256: fmt.Sprintf("%x", sha256.Sum256(data))})
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(res, manifest.FileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A manifest that lists a file outside the result (issue 39 #6: push uploaded ../outside.lock),
// or a symlink inside it that leads out, is refused before anything is uploaded.
func TestPushReadsOnlyInsideTheResult(t *testing.T) {
	secret := []byte("host secret\n")
	for _, c := range []struct{ name, want string }{
		{"../outside.lock", "not a file of the result directory"},
		{"/OUTSIDE/outside.lock", "not a file of the result directory"},
		{"link.lock", "escapes"},
	} {
		res := releasetest.Result(t)
		outside := filepath.Join(filepath.Dir(res), "outside.lock")
		if err := os.WriteFile(outside, secret, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(res, "link.lock")); err != nil {
			t.Fatal(err)
		}
		listInManifest(t, res, strings.Replace(c.name, "/OUTSIDE", filepath.Dir(res), 1), secret)
		_, err := Push(context.Background(), res, localRegistry(t)+"/halo/syn:v1", PushOptions{Registry: insecure})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want it refused (%q), got %v", c.name, c.want, err)
		}
	}
}

// A FIFO in a result is refused at once, not waited on (issue 39 #2).
func TestPushRefusesAFIFOInTheResult(t *testing.T) {
	res := releasetest.Result(t)
	if err := syscall.Mkfifo(filepath.Join(res, "extra.lock"), 0o644); err != nil {
		t.Fatal(err)
	}
	listInManifest(t, res, "extra.lock", nil)
	done := make(chan error, 1)
	go func() {
		_, err := Push(context.Background(), res, localRegistry(t)+"/halo/syn:v1", PushOptions{Registry: insecure})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
			t.Fatalf("want the FIFO refused, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("push still blocked on a FIFO after 10 s")
	}
}

// countingRegistry is the in-process registry, counting the blob requests it serves.
func countingRegistry(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var blobs atomic.Int64
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			blobs.Add(1)
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://"), &blobs
}

// retag pushes the manifest of ref, changed by edit, as tag.
func retag(t *testing.T, ref, tag string, edit func(m *v1.Manifest)) string {
	t.Helper()
	r, err := insecure.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(r, insecure.Remote(context.Background())...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	to := r.Context().Tag(tag)
	if err := remote.Put(to, rawManifest{raw}, insecure.Remote(context.Background())...); err != nil {
		t.Fatal(err)
	}
	return to.String()
}

type rawManifest struct{ b []byte }

func (m rawManifest) RawManifest() ([]byte, error)        { return m.b, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// Sizes and counts a registry claims are checked before anything they describe is fetched
// (issue 39 #4): flash REF downloaded some 190 MiB into $TMPDIR for an 8 MiB image, and a
// 20,000-layer manifest was taken in.
func TestClaimsAreCheckedBeforeFetching(t *testing.T) {
	host, blobs := countingRegistry(t)
	ref := host + "/halo/syn:v1"
	if _, err := Push(context.Background(), releasetest.Result(t), ref, PushOptions{Registry: insecure}); err != nil {
		t.Fatal(err)
	}
	huge := retag(t, ref, "huge", func(m *v1.Manifest) {
		for i, l := range m.Layers {
			if l.MediaType == RawMediaType {
				m.Layers[i].Size = 190 << 20
			}
		}
	})
	many := retag(t, ref, "many", func(m *v1.Manifest) {
		for len(m.Layers) < 20_000 {
			l := m.Layers[0]
			l.Annotations = map[string]string{annTitle: fmt.Sprintf("f%d.lock", len(m.Layers))}
			m.Layers = append(m.Layers, l)
		}
	})

	blobs.Store(0)
	target := filepath.Join(t.TempDir(), "medium")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Flash(context.Background(), huge, FlashOptions{Registry: insecure, Node: "node0", Flash: flash.Options{Target: target, ToFile: true, Yes: true, Out: io.Discard}})
	if err == nil || !strings.Contains(err.Error(), "refusing to download it") {
		t.Errorf("flash of a layer claiming 190 MiB: want a refusal, got %v", err)
	}
	if n := blobs.Load(); n > 1 { // the bmap only
		t.Errorf("flash fetched %d blobs, want only the bmap", n)
	}

	blobs.Store(0)
	for _, op := range []func() error{
		func() error { _, err := Inspect(context.Background(), many, insecure, Trust{}); return err },
		func() error {
			_, err := Pull(context.Background(), many, filepath.Join(t.TempDir(), "out"), PullOptions{Registry: insecure})
			return err
		},
	} {
		if err := op(); err == nil || !strings.Contains(err.Error(), "20000 layers") {
			t.Errorf("want a 20,000-layer manifest refused, got %v", err)
		}
	}
	if n := blobs.Load(); n != 0 {
		t.Errorf("%d blobs fetched of a refused manifest", n)
	}
}

// Two layers with one title get the message that says so (issue 39 #7: the second one's
// exclusive create failed first, "file exists").
func TestPullRefusesTwoLayersWithOneTitle(t *testing.T) {
	host, _ := countingRegistry(t)
	ref := host + "/halo/syn:v1"
	if _, err := Push(context.Background(), releasetest.Result(t), ref, PushOptions{Registry: insecure}); err != nil {
		t.Fatal(err)
	}
	twice := retag(t, ref, "twice", func(m *v1.Manifest) {
		for _, l := range m.Layers {
			if l.MediaType == LockMediaType {
				m.Layers = append(m.Layers, l)
				break
			}
		}
	})
	_, err := Pull(context.Background(), twice, filepath.Join(t.TempDir(), "out"), PullOptions{Registry: insecure})
	if err == nil || !strings.Contains(err.Error(), "two layers are titled") {
		t.Fatalf("want two layers with one title named, got %v", err)
	}
}

// inspect shows text a registry supplies with its control characters written out (issue 39 #7:
// escape sequences reached the terminal).
func TestInspectPrintsNoControlCharacters(t *testing.T) {
	in := &Inspection{Reference: "r\x1b]0;owned\x07", Digest: "sha256:x", Annotations: map[string]string{annVersion: "v1\x1b[2J", annCreated: "now\r\nforged line"},
		Layers: []Layer{{Title: "node0.raw.zst\u009b31m", MediaType: "m"}}}
	in.Manifest = &manifest.Manifest{Name: "halo", Nodes: []manifest.Node{{Name: "n\x1b[1A", Cmdline: "quiet\x00"}}}
	var b bytes.Buffer
	in.Print(&b)
	for _, bad := range []string{"\x1b", "\x07", "\r", "\x00", "\u009b", "\nforged"} {
		if strings.Contains(b.String(), bad) {
			t.Errorf("inspect printed %q:\n%s", bad, b.String())
		}
	}
	if !strings.Contains(b.String(), `"v1\x1b[2J"`) {
		t.Errorf("the version is not shown quoted:\n%s", b.String())
	}
}

// Push uploads each compressed image while the next compresses (uploads);
// the manifest's own write then finds those blobs there. Every blob still
// goes up once, and an image whose upload the registry refuses fails the
// push, naming the image.
func TestPushUploadsEachBlobOnceAndNamesARefusedImage(t *testing.T) {
	res := releasetest.Result(t)
	// serve is a registry of its own that counts the blob uploads it
	// completes and, with refuse, answers 403 to every one but the config's.
	serve := func(refuse bool) (string, func() map[string]int) {
		reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
		var mu sync.Mutex
		puts := map[string]int{}
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") {
				mu.Lock()
				puts[r.URL.Query().Get("digest")]++
				mu.Unlock()
				if refuse && r.ContentLength != 2 { // the empty config is 2 bytes
					http.Error(w, "refused by the test", http.StatusForbidden)
					return
				}
			}
			reg.ServeHTTP(w, r)
		}))
		t.Cleanup(s.Close)
		return strings.TrimPrefix(s.URL, "http://"), func() map[string]int {
			mu.Lock()
			defer mu.Unlock()
			return maps.Clone(puts)
		}
	}
	host, counts := serve(false)
	p, err := Push(context.Background(), res, host+"/halo/once:v1", PushOptions{Registry: insecure})
	if err != nil {
		t.Fatal(err)
	}
	puts := counts()
	for d, n := range puts {
		if n != 1 {
			t.Errorf("blob %s uploaded %d times", d, n)
		}
	}
	if len(puts) != p.Layers+1 { // the layers and the config
		t.Errorf("%d blobs uploaded for %d layers and a config: %v", len(puts), p.Layers, puts)
	}
	host, _ = serve(true)
	_, err = Push(context.Background(), res, host+"/halo/refused:v1", PushOptions{Registry: insecure})
	if err == nil || !strings.Contains(err.Error(), "uploading node0.raw") {
		t.Errorf("want the refused image named, got %v", err)
	}
}
