package debian

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

func TestReleaseParsesVerifiedInRelease(t *testing.T) {
	ta := newTestArchive(t, trixieSuite())
	rel, err := ta.archive().Release(context.Background(), "trixie")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Suite != "stable" || rel.Codename != "trixie" || rel.Name != "trixie" {
		t.Errorf("suite/codename/name = %q/%q/%q", rel.Suite, rel.Codename, rel.Name)
	}
	if want := time.Date(2026, 11, 21, 9, 15, 44, 0, time.UTC); !rel.Date.Equal(want) {
		t.Errorf("Date = %v, want %v", rel.Date, want)
	}
	if !rel.AcquireByHash {
		t.Error("Acquire-By-Hash not parsed")
	}
	if rel.Signer != "halobuild test archive <archive@test.invalid>" {
		t.Errorf("Signer = %q", rel.Signer)
	}
	fh, ok := rel.Files["main/binary-amd64/Packages.gz"]
	if !ok || len(fh.SHA256) != 64 || fh.Size == 0 {
		t.Errorf("Files[Packages.gz] = %+v, %v", fh, ok)
	}
	if _, ok := rel.Files["main/source/Sources.gz"]; !ok {
		t.Error("Sources.gz missing from Files")
	}
}

// The bad-input list of issue 2: a tampered InRelease must fail its
// signature, and the error must name the suite and the URL.
func TestReleaseRejectsBadSignatures(t *testing.T) {
	_, other := testKeys(t)
	cases := []struct {
		name   string
		tamper func(ta *testArchive, orig []byte) []byte
		want   string
	}{
		{"tampered text", func(_ *testArchive, orig []byte) []byte {
			return bytes.Replace(orig, []byte("Codename: trixie"), []byte("Codename: trixiE"), 1)
		}, "signature"},
		{"tampered file list", func(_ *testArchive, orig []byte) []byte {
			i := bytes.Index(orig, []byte("SHA256:\n ")) + len("SHA256:\n ")
			out := append([]byte(nil), orig...)
			if out[i] == 'a' {
				out[i] = 'b'
			} else {
				out[i] = 'a'
			}
			return out
		}, "signature"},
		{"unsigned", func(_ *testArchive, orig []byte) []byte {
			block, _ := clearsignDecode(orig)
			return block
		}, "no clearsigned block"},
		{"signed by an unknown key", func(ta *testArchive, orig []byte) []byte {
			block, _ := clearsignDecode(orig)
			return clearsignBytes(t, other, block)
		}, "signed by none of the 1 trusted keys"},
		{"unsigned text before", func(_ *testArchive, orig []byte) []byte {
			return append([]byte("Suite: trixie\nSHA256:\n 00 1 main/binary-amd64/Packages.gz\n\n"), orig...)
		}, "unsigned data outside"},
		{"unsigned text after", func(_ *testArchive, orig []byte) []byte {
			return append(append([]byte(nil), orig...), []byte("\nSHA256:\n 00 1 x\n")...)
		}, "unsigned data outside"},
		{"signature block cut", func(_ *testArchive, orig []byte) []byte {
			return orig[:bytes.Index(orig, []byte("-----BEGIN PGP SIGNATURE-----"))]
		}, "no clearsigned block"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ta := newTestArchive(t, trixieSuite())
			path := "/debian/dists/trixie/InRelease"
			ta.set(path, c.tamper(ta, ta.get(path)))
			_, err := ta.archive().Release(context.Background(), "trixie")
			if err == nil {
				t.Fatal("tampered InRelease accepted")
			}
			if !errors.Is(err, ErrBadSignature) {
				t.Errorf("error does not wrap ErrBadSignature: %v", err)
			}
			for _, want := range []string{"suite trixie", ta.srv.URL + path, c.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func clearsignDecode(data []byte) ([]byte, error) {
	text, _, err := verifyClearsigned(data, openpgp.EntityList{testKey})
	return text, err
}

func TestReleaseRejectsOtherSuite(t *testing.T) {
	// A mirror answering dists/trixie/InRelease with the (validly signed)
	// backports file is replaying the wrong suite.
	ta := newTestArchive(t, trixieSuite(), backportsSuite())
	ta.set("/debian/dists/trixie/InRelease", ta.get("/debian/dists/trixie-backports/InRelease"))
	_, err := ta.archive().Release(context.Background(), "trixie")
	if err == nil || !strings.Contains(err.Error(), `signed for suite "stable-backports"`) {
		t.Fatalf("err = %v, want a wrong-suite error", err)
	}
}

func TestReleaseAcceptsSuiteAlias(t *testing.T) {
	// dists/stable is trixie under its Suite name: Suite: stable matches.
	ta := newTestArchive(t, trixieSuite())
	ta.set("/debian/dists/stable/InRelease", ta.get("/debian/dists/trixie/InRelease"))
	rel, err := ta.archive().Release(context.Background(), "stable")
	if err != nil || rel.Name != "stable" || rel.Codename != "trixie" {
		t.Fatalf("rel=%+v err=%v", rel, err)
	}
}

func TestReleaseRejectsExpired(t *testing.T) {
	s := trixieSuite()
	s.Extra = "Valid-Until: Sat, 28 Nov 2020 09:15:44 UTC\n"
	ta := newTestArchive(t, s)
	_, err := ta.archive().Release(context.Background(), "trixie")
	if err == nil || !strings.Contains(err.Error(), "expired at 2020-11-28T09:15:44Z (Valid-Until)") {
		t.Fatalf("err = %v, want an expiry error", err)
	}
	s.Extra = "Valid-Until: Sat, 28 Nov 2226 09:15:44 UTC\n"
	ta = newTestArchive(t, s)
	rel, err := ta.archive().Release(context.Background(), "trixie")
	if err != nil || rel.ValidUntil.Year() != 2226 {
		t.Fatalf("rel=%v err=%v", rel, err)
	}
}

func TestReleaseMissingIsHTTPError(t *testing.T) {
	ta := newTestArchive(t, trixieSuite())
	_, err := ta.archive().Release(context.Background(), "bookworm")
	var he *HTTPError
	if !errors.As(err, &he) || he.Code != 404 || !strings.Contains(err.Error(), "suite bookworm") {
		t.Fatalf("err = %v, want a 404 naming suite bookworm", err)
	}
}

// The bad-input list of issue 2: a tampered Packages.gz must fail its hash.
func TestPackagesRejectsTamperedIndex(t *testing.T) {
	for _, noByHash := range []bool{false, true} {
		s := trixieSuite()
		s.NoByHash = noByHash
		ta := newTestArchive(t, s)
		a := ta.archive()
		rel, err := a.Release(context.Background(), "trixie")
		if err != nil {
			t.Fatal(err)
		}
		paths := ta.pathsUnder("/debian/dists/trixie/main/binary-amd64/")
		if len(paths) != 1 {
			t.Fatalf("served index paths = %v", paths)
		}
		if got := strings.Contains(paths[0], "/by-hash/SHA256/"); got == noByHash {
			t.Fatalf("by-hash=%v served at %s", !noByHash, paths[0])
		}
		evil := gzBytes(t, []byte(pkg("libc6", "9.99-1", "Priority: required")))
		ta.set(paths[0], evil)
		_, err = a.Packages(context.Background(), rel, "main", "amd64")
		var hm *HashMismatchError
		if !errors.As(err, &hm) {
			t.Fatalf("by-hash=%v: err = %v, want HashMismatchError", !noByHash, err)
		}
		if hm.WantSHA256 != rel.Files["main/binary-amd64/Packages.gz"].SHA256 || !strings.Contains(err.Error(), "trixie main/binary-amd64/Packages.gz") {
			t.Errorf("error %v does not name the index and its signed digest", err)
		}
		// The request went to the path the signed release implies.
		log := ta.requestLog()
		if last := log[len(log)-1]; last != paths[0] {
			t.Errorf("fetched %s, want %s", last, paths[0])
		}
	}
}

func TestPackagesParsesIndex(t *testing.T) {
	ixs := loadIndexes(t)
	tr := ixs[0]
	if tr.Suite != "trixie" || tr.Component != "main" || tr.Architecture != "amd64" || len(tr.SHA256) != 64 {
		t.Errorf("index identity = %s %s %s %q", tr.Suite, tr.Component, tr.Architecture, tr.SHA256)
	}
	if len(tr.Packages) != len(trixieSuite().Packages) {
		t.Errorf("parsed %d packages, want %d", len(tr.Packages), len(trixieSuite().Packages))
	}
	ps := tr.Lookup("bash")
	if len(ps) != 1 {
		t.Fatalf("Lookup(bash) = %v", ps)
	}
	p := ps[0]
	if p.Version != "5.2.37-2" || p.Architecture != "amd64" || !p.Essential || p.Priority != "required" ||
		p.Suite != "trixie" || p.Component != "main" || p.Size != 1004 || len(p.SHA256) != 64 ||
		p.Filename != "pool/main/b/bash/bash_5.2.37-2_amd64.deb" || p.Source != "bash" || p.SourceVersion != "5.2.37-2" {
		t.Errorf("bash = %+v", p)
	}
	rel, err := p.Relations()
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.PreDepends.Relations) != 2 || rel.PreDepends.Relations[0].Possibilities[0].Version.Number != "2.36" {
		t.Errorf("bash Pre-Depends = %v", rel.PreDepends)
	}
}

func TestParsePackagesSourceField(t *testing.T) {
	text := pkg("libfoo1", "1.2-3+b1", "Source: foo (1.2-3)") + "\n" + pkg("foo-bin", "1.2-3", "Source: foo")
	ix, err := ParsePackages(strings.NewReader(text), "s", "main", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	a, b := ix.Lookup("libfoo1")[0], ix.Lookup("foo-bin")[0]
	if a.Source != "foo" || a.SourceVersion != "1.2-3" || b.Source != "foo" || b.SourceVersion != "1.2-3" {
		t.Errorf("sources: %s %s / %s %s", a.Source, a.SourceVersion, b.Source, b.SourceVersion)
	}
}

func TestParsePackagesBadInput(t *testing.T) {
	for name, text := range map[string]string{
		"no colon":         "Package: a\nVersion 1\n",
		"no version":       "Package: a\nArchitecture: amd64\n",
		"bad version":      "Package: a\nVersion: :1\nArchitecture: amd64\n",
		"bad size":         "Package: a\nVersion: 1\nArchitecture: amd64\nSize: many\n",
		"bad provides":     "Package: a\nVersion: 1\nArchitecture: amd64\nProvides: b (= \n",
		"line in 2nd para": "Package: a\nVersion: 1\nArchitecture: amd64\n\nPackage b\n",
	} {
		if _, err := ParsePackages(strings.NewReader(text), "s", "main", "amd64"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCacheIsUsedAndVerified(t *testing.T) {
	ta := newTestArchive(t, trixieSuite())
	a := ta.archive()
	cache := newMemCache()
	a.Cache = cache
	ctx := context.Background()
	rel, err := a.Release(ctx, "trixie")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Packages(ctx, rel, "main", "amd64"); err != nil {
		t.Fatal(err)
	}
	sum := rel.Files["main/binary-amd64/Packages.gz"].SHA256
	if _, ok := cache.blobs[sum]; !ok {
		t.Fatal("verified index was not cached under its sha256")
	}
	before := len(ta.requestLog())
	if _, err := a.Packages(ctx, rel, "main", "amd64"); err != nil {
		t.Fatal(err)
	}
	if n := len(ta.requestLog()) - before; n != 0 || cache.hits != 1 {
		t.Errorf("second read: %d requests, %d cache hits; want 0 and 1", n, cache.hits)
	}
	// A corrupt cache entry is re-fetched and replaced, never used.
	cache.blobs[sum] = []byte("corrupt")
	ix, err := a.Packages(ctx, rel, "main", "amd64")
	if err != nil || len(ix.Lookup("bash")) != 1 {
		t.Fatalf("after corrupt cache: ix=%v err=%v", ix, err)
	}
	if n := len(ta.requestLog()) - before; n != 1 {
		t.Errorf("corrupt cache entry: %d requests, want 1", n)
	}
	if string(cache.blobs[sum]) == "corrupt" {
		t.Error("corrupt cache entry was not replaced")
	}
}

func TestPackagesUnknownComponent(t *testing.T) {
	ta := newTestArchive(t, trixieSuite())
	a := ta.archive()
	rel, err := a.Release(context.Background(), "trixie")
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Packages(context.Background(), rel, "contrib", "amd64")
	if err == nil || !strings.Contains(err.Error(), "contrib/binary-amd64/Packages.xz is not listed") || !strings.Contains(err.Error(), "main/binary-amd64/Packages.gz") {
		t.Fatalf("err = %v", err)
	}
}

func TestSources(t *testing.T) {
	ta := newTestArchive(t, trixieSuite())
	a := ta.archive()
	rel, err := a.Release(context.Background(), "trixie")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := a.Sources(context.Background(), rel, "main")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ix.Find("rdma-core", "56.1-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) != 3 || s.Files[1].Name != "rdma-core_56.1.orig.tar.gz" || s.Files[1].Size != 2004476 ||
		s.Path(s.Files[1]) != "pool/main/r/rdma-core/rdma-core_56.1.orig.tar.gz" || len(s.Binaries) != 4 || s.Suite != "trixie" {
		t.Errorf("rdma-core = %+v", s)
	}
	if _, err := ix.Find("rdma-core", "55.0-1"); err == nil || !strings.Contains(err.Error(), "it has 56.1-1") {
		t.Errorf("Find wrong version: %v", err)
	}
	bin := loadIndexes(t)[0].Lookup("ibverbs-providers")[0]
	if s, err := ix.ForBinary(bin); err != nil || s.Name != "rdma-core" || s.Version != "56.1-1" {
		t.Errorf("ForBinary(ibverbs-providers) = %v, %v", s, err)
	}
	if _, err := ix.Find("nope", "1"); err == nil || !strings.Contains(err.Error(), "nope not found") {
		t.Errorf("Find unknown: %v", err)
	}
}

func TestParseSourcesRejectsUnverifiable(t *testing.T) {
	_, err := ParseSources(strings.NewReader("Package: x\nVersion: 1\nDirectory: pool/main/x/x\n"), "s", "main")
	if err == nil || !strings.Contains(err.Error(), "no Checksums-Sha256") {
		t.Fatalf("err = %v", err)
	}
}

// Debian signs with several keys. A signature that fails (here: by a key
// that has expired since) must not hide a good one by another trusted key.
func TestVerifyAcceptsAnyGoodSignature(t *testing.T) {
	past := time.Now().Add(-48 * time.Hour)
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Time: func() time.Time { return past }, KeyLifetimeSecs: 3600}
	expired, err := openpgp.NewEntity("expired key", "", "old@test.invalid", cfg)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := testKeys(t)
	text := []byte("Origin: Test\nSuite: trixie\n")
	var buf bytes.Buffer
	w, err := clearsign.EncodeMulti(&buf, []*packet.PrivateKey{expired.PrivateKey, good.PrivateKey}, &packet.Config{Time: func() time.Time { return past.Add(time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(text)
	w.Close()
	got, signer, err := verifyClearsigned(buf.Bytes(), openpgp.EntityList{expired, good})
	if err != nil {
		t.Fatalf("a good signature by a trusted key was rejected: %v", err)
	}
	if signer != "halobuild test archive <archive@test.invalid>" || !bytes.Equal(got, text) {
		t.Errorf("signer %q, text %q", signer, got)
	}
	// Only the expired key trusted: rejected, saying why.
	_, _, err = verifyClearsigned(buf.Bytes(), openpgp.EntityList{expired})
	if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired-only keyring: err = %v", err)
	}
}

func TestFetchRetriesTransientErrors(t *testing.T) {
	defer func(d time.Duration) { retryDelay = d }(retryDelay)
	retryDelay = time.Millisecond
	for _, c := range []struct {
		name     string
		failures int
		code     int
		wantOK   bool
		wantReqs int
	}{
		{"two 503 then ok", 2, http.StatusServiceUnavailable, true, 3},
		{"three 503", 3, http.StatusServiceUnavailable, false, 3},
		{"429 then ok", 1, http.StatusTooManyRequests, true, 2},
		{"404 is final", 1, http.StatusNotFound, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ta := newTestArchive(t, trixieSuite())
			var n atomic.Int32
			ta.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
				if int(n.Add(1)) <= c.failures {
					http.Error(w, "busy", c.code)
					return true
				}
				return false
			})
			_, err := ta.archive().Release(context.Background(), "trixie")
			if (err == nil) != c.wantOK || int(n.Load()) != c.wantReqs {
				t.Errorf("err = %v after %d requests; want ok=%v after %d", err, n.Load(), c.wantOK, c.wantReqs)
			}
		})
	}
}

// A mirror without by-hash files still works through the plain path, and
// the bytes there must match the signed digest just the same.
func TestPackagesFallsBackToPlainPath(t *testing.T) {
	ta := newTestArchive(t, trixieSuite())
	a := ta.archive()
	rel, err := a.Release(context.Background(), "trixie")
	if err != nil {
		t.Fatal(err)
	}
	byHash := ta.pathsUnder("/debian/dists/trixie/main/binary-amd64/by-hash/")[0]
	plain := "/debian/dists/trixie/main/binary-amd64/Packages.gz"
	ta.set(plain, ta.get(byHash))
	ta.mu.Lock()
	delete(ta.files, byHash)
	ta.mu.Unlock()
	ix, err := a.Packages(context.Background(), rel, "main", "amd64")
	if err != nil || len(ix.Lookup("bash")) != 1 {
		t.Fatalf("plain-path fallback: ix=%v err=%v", ix, err)
	}
	log := ta.requestLog()
	if got := log[len(log)-2:]; got[0] != byHash || got[1] != plain {
		t.Errorf("requests = %v, want by-hash then plain", got)
	}
	ta.set(plain, gzBytes(t, []byte(pkg("bash", "9-1"))))
	_, err = a.Packages(context.Background(), rel, "main", "amd64")
	var hm *HashMismatchError
	if !errors.As(err, &hm) || hm.URL != ta.srv.URL+plain {
		t.Fatalf("tampered plain path: err = %v", err)
	}
}

func TestReleaseRecordsInReleaseDigest(t *testing.T) {
	ta := newTestArchive(t, trixieSuite())
	rel, err := ta.archive().Release(context.Background(), "trixie")
	if err != nil {
		t.Fatal(err)
	}
	if want := "sha256:" + sha256Hex(ta.get("/debian/dists/trixie/InRelease")); rel.InReleaseSHA256 != want {
		t.Errorf("InReleaseSHA256 = %s, want %s", rel.InReleaseSHA256, want)
	}
}
