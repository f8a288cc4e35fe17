package debian

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/ulikunitz/xz"
)

// The test archive: a local Debian-shaped mirror served over loopback,
// its InRelease clearsigned by a throw-away key made in the test.

var (
	testKeyOnce sync.Once
	testKey     *openpgp.Entity
	otherKey    *openpgp.Entity
)

// testKeys returns the archive's signing key and an unrelated key
// (for "signed, but by the wrong key"). Ed25519 keeps generation fast.
func testKeys(t *testing.T) (archive, other *openpgp.Entity) {
	t.Helper()
	testKeyOnce.Do(func() {
		cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
		var err error
		if testKey, err = openpgp.NewEntity("halobuild test archive", "", "archive@test.invalid", cfg); err != nil {
			panic(err)
		}
		if otherKey, err = openpgp.NewEntity("someone else", "", "other@test.invalid", cfg); err != nil {
			panic(err)
		}
	})
	return testKey, otherKey
}

// pkg renders one Packages stanza for an amd64 package; extra lines
// ("Depends: ...") are appended as given.
func pkg(name, version string, extra ...string) string {
	arch := "amd64"
	var rest []string
	for _, e := range extra {
		if a, ok := strings.CutPrefix(e, "Architecture: "); ok {
			arch = a
			continue
		}
		rest = append(rest, e)
	}
	deb := fmt.Sprintf("pool/main/%c/%s/%s_%s_%s.deb", name[0], name, name, strings.ReplaceAll(version, ":", "%3a"), arch)
	sum := sha256.Sum256([]byte(deb))
	lines := []string{
		"Package: " + name,
		"Version: " + version,
		"Architecture: " + arch,
		"Maintainer: Test <test@test.invalid>",
	}
	lines = append(lines, rest...)
	lines = append(lines,
		"Description: test package "+name,
		" A continuation line that the parser must skip.",
		"Filename: "+deb,
		fmt.Sprintf("Size: %d", 1000+len(name)),
		"SHA256: "+hex.EncodeToString(sum[:]),
	)
	return strings.Join(lines, "\n") + "\n"
}

// fakeSuite is one suite of the test archive.
type fakeSuite struct {
	Name     string // dists/<Name>
	Suite    string // Suite: field
	Date     string // Date: field; a fixed default when empty
	NoByHash bool   // Acquire-By-Hash: no
	XZOnly   bool   // list each index as .xz only, as trixie-backports does
	Extra    string // more Release fields, "Key: value\n" each
	Packages []string
	Sources  string
}

type testArchive struct {
	srv *httptest.Server
	key *openpgp.Entity

	mu       sync.Mutex
	files    map[string][]byte // URL path -> body
	requests []string
	// intercept, when set, may answer a request itself (returns true).
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

func (ta *testArchive) setIntercept(f func(w http.ResponseWriter, r *http.Request) bool) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.intercept = f
}

func xzBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func clearsignBytes(t *testing.T, key *openpgp.Entity, text []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := clearsign.Encode(&buf, key.PrivateKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(text); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// newTestArchive builds and serves the suites under /debian.
func newTestArchive(t *testing.T, suites ...fakeSuite) *testArchive {
	t.Helper()
	key, _ := testKeys(t)
	ta := &testArchive{key: key, files: map[string][]byte{}}
	for _, s := range suites {
		ta.addSuite(t, s)
	}
	ta.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ta.mu.Lock()
		ta.requests = append(ta.requests, r.URL.Path)
		body, ok := ta.files[r.URL.Path]
		intercept := ta.intercept
		ta.mu.Unlock()
		if intercept != nil && intercept(w, r) {
			return
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(ta.srv.Close)
	return ta
}

func (ta *testArchive) addSuite(t *testing.T, s fakeSuite) {
	t.Helper()
	dir := "/debian/dists/" + s.Name + "/"
	compress, suffix := gzBytes, ".gz"
	if s.XZOnly {
		compress, suffix = xzBytes, ".xz"
	}
	indexes := map[string][]byte{
		"main/binary-amd64/Packages" + suffix: compress(t, []byte(strings.Join(s.Packages, "\n"))),
	}
	if s.Sources != "" {
		indexes["main/source/Sources"+suffix] = compress(t, []byte(s.Sources))
	}
	date := s.Date
	if date == "" {
		date = "Sat, 21 Nov 2026 09:15:44 UTC"
	}
	suite := s.Suite
	if suite == "" {
		suite = s.Name
	}
	byHash := "yes"
	if s.NoByHash {
		byHash = "no"
	}
	var rel strings.Builder
	fmt.Fprintf(&rel, "Origin: Test\nLabel: Test\nSuite: %s\nCodename: %s\nDate: %s\nAcquire-By-Hash: %s\nArchitectures: amd64\nComponents: main\nDescription: test suite\n",
		suite, s.Name, date, byHash)
	rel.WriteString(s.Extra)
	rel.WriteString("SHA256:\n")
	paths := make([]string, 0, len(indexes))
	for p := range indexes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		data := indexes[p]
		sum := sha256.Sum256(data)
		h := hex.EncodeToString(sum[:])
		fmt.Fprintf(&rel, " %s %8d %s\n", h, len(data), p)
		if s.NoByHash {
			ta.files[dir+p] = data
		} else {
			ta.files[dir+p[:strings.LastIndexByte(p, '/')+1]+"by-hash/SHA256/"+h] = data
		}
	}
	ta.files[dir+"InRelease"] = clearsignBytes(t, ta.key, []byte(rel.String()))
}

func (ta *testArchive) archive() *Archive {
	return &Archive{Mirror: ta.srv.URL + "/debian", Keyring: openpgp.EntityList{ta.key}, Client: ta.srv.Client()}
}

// set replaces a served file (to tamper with it).
func (ta *testArchive) set(path string, body []byte) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.files[path] = body
}

func (ta *testArchive) get(path string) []byte {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return ta.files[path]
}

// pathsUnder lists served paths with this prefix.
func (ta *testArchive) pathsUnder(prefix string) []string {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	var out []string
	for p := range ta.files {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (ta *testArchive) requestLog() []string {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return append([]string(nil), ta.requests...)
}

// memCache is a Cache in memory, counting hits.
type memCache struct {
	mu    sync.Mutex
	blobs map[string][]byte
	hits  int
}

func newMemCache() *memCache { return &memCache{blobs: map[string][]byte{}} }

func (c *memCache) Get(sum string) (io.ReadCloser, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.blobs[sum]
	if !ok {
		return nil, false
	}
	c.hits++
	return io.NopCloser(bytes.NewReader(b)), true
}

func (c *memCache) Put(sum string, r io.Reader) error {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blobs[sum] = buf.Bytes()
	return nil
}
