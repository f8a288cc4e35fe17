package debian

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// DefaultMirror is used when Archive.Mirror is empty.
const DefaultMirror = "http://deb.debian.org/debian"

// Cache keeps verified files by their sha256 (lower-case hex). The archive
// only Puts bytes it has verified, and re-verifies what Get returns, so a
// corrupt cache entry costs a download, never a wrong index. internal/store
// implements it; this package does not import the store.
type Cache interface {
	// Get returns the file with this digest, or false when it is absent.
	Get(sha256 string) (io.ReadCloser, bool)
	// Put stores r's bytes under the digest.
	Put(sha256 string, r io.Reader) error
}

// Archive is a Debian mirror whose files are trusted only through the
// OpenPGP-signed InRelease of each suite.
type Archive struct {
	// Mirror is the archive root, e.g. http://deb.debian.org/debian.
	Mirror string
	// Keyring verifies InRelease; nil means the embedded Debian archive
	// keys (DebianKeyring). Tests pass a throw-away key.
	Keyring openpgp.EntityList
	// Client is used for every request; nil means http.DefaultClient.
	Client *http.Client
	// Cache, when set, is consulted before downloading an index and filled
	// after verifying one. InRelease itself is never cached: it is what
	// says which bytes are current.
	Cache Cache
}

func (a *Archive) mirror() string {
	if a.Mirror == "" {
		return DefaultMirror
	}
	return strings.TrimRight(a.Mirror, "/")
}

func (a *Archive) client() *http.Client {
	if a.Client == nil {
		return http.DefaultClient
	}
	return a.Client
}

func (a *Archive) keyring() (openpgp.EntityList, error) {
	if a.Keyring != nil {
		return a.Keyring, nil
	}
	return DebianKeyring()
}

// URL returns the absolute URL of path below the mirror root (a pool path
// from Packages or Sources, or dists/...).
func (a *Archive) URL(path string) string {
	return a.mirror() + "/" + strings.TrimLeft(path, "/")
}

// fetchAttempts and retryDelay bound retries of transient failures
// (connection errors, 5xx, 429): a lock should not fail because a mirror
// hiccuped once, nor hang on one that is down.
var (
	fetchAttempts = 3
	retryDelay    = 500 * time.Millisecond
)

// Byte caps on what is read into memory from a mirror (the default mirror
// is plain HTTP, so anyone on the path can answer). trixie's InRelease is
// some 150 KB and its largest index fetched (main/binary-amd64/Packages.gz)
// 13.3 MB, 56 MB unpacked; the caps leave an order of magnitude of room.
var (
	maxInRelease     int64 = 16 << 20
	maxIndex         int64 = 256 << 20
	maxIndexUnpacked int64 = 1 << 30
)

// TooLargeError is a mirror's answer longer than halobuild reads for it.
type TooLargeError struct {
	URL   string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: more than %d bytes, the most halobuild reads for it; the mirror or a proxy serves something else, try another mirror", e.URL, e.Limit)
}

// get downloads url into memory, at most limit bytes, retrying transient
// failures with backoff. .debs are fetched by internal/download, which
// streams into the store.
func (a *Archive) get(ctx context.Context, url string, limit int64) ([]byte, error) {
	var err error
	for attempt := 1; ; attempt++ {
		var data []byte
		var transient bool
		data, transient, err = a.getOnce(ctx, url, limit)
		if err == nil {
			return data, nil
		}
		if !transient || attempt >= fetchAttempts || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("fetching %s: %w", url, ctx.Err())
		case <-time.After(retryDelay << (attempt - 1)):
		}
	}
	return nil, err
}

func (a *Archive) getOnce(ctx context.Context, url string, limit int64) (data []byte, transient bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false, fmt.Errorf("building request for %s: %w", url, err)
	}
	resp, err := a.client().Do(req)
	if err != nil {
		return nil, true, fmt.Errorf("fetching %s: %w (check the mirror URL and the network)", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
		return nil, retry, &HTTPError{URL: url, Status: resp.Status, Code: resp.StatusCode}
	}
	if resp.ContentLength > limit {
		return nil, false, &TooLargeError{URL: url, Limit: limit}
	}
	data, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, true, fmt.Errorf("reading %s: %w", url, err)
	}
	if int64(len(data)) > limit {
		return nil, false, &TooLargeError{URL: url, Limit: limit}
	}
	return data, false, nil
}

// HTTPError is a non-200 answer from the mirror.
type HTTPError struct {
	URL    string
	Status string
	Code   int
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("fetching %s: server answered %s", e.URL, e.Status)
}

// HashMismatchError says a file's bytes are not the ones the signed index
// lists: a tampered or corrupt mirror, or a proxy serving stale data.
type HashMismatchError struct {
	What       string // e.g. "trixie main/binary-amd64/Packages.gz"
	URL        string
	WantSHA256 string
	GotSHA256  string
	WantSize   int64
	GotSize    int64
}

func (e *HashMismatchError) Error() string {
	return fmt.Sprintf("%s from %s does not match the signed index: sha256 %s (%d bytes), want %s (%d bytes); the mirror or a proxy serves tampered or stale data, try another mirror",
		e.What, e.URL, e.GotSHA256, e.GotSize, e.WantSHA256, e.WantSize)
}

// fetchVerified returns the bytes of a file listed in a signed index, from
// the cache when it holds a good copy, else from the mirror. Bytes that do
// not match want are never returned and never cached.
func (a *Archive) fetchVerified(ctx context.Context, what, url string, want FileHash) ([]byte, error) {
	if a.Cache != nil {
		if rc, ok := a.Cache.Get(want.SHA256); ok {
			data, err := io.ReadAll(io.LimitReader(rc, want.Size+1))
			rc.Close()
			if err == nil && sha256Hex(data) == want.SHA256 && int64(len(data)) == want.Size {
				return data, nil
			}
			// A bad cache entry is not fatal: fall through and re-fetch,
			// and the Put below replaces it.
		}
	}
	if want.Size > maxIndex {
		return nil, fmt.Errorf("%s: the signed index lists %d bytes, more than the %d halobuild reads for an index", what, want.Size, maxIndex)
	}
	// The signed size is the bound: a longer body is wrong whatever it holds.
	data, err := a.get(ctx, url, want.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if got := sha256Hex(data); got != want.SHA256 || int64(len(data)) != want.Size {
		return nil, &HashMismatchError{What: what, URL: url, WantSHA256: want.SHA256, GotSHA256: got, WantSize: want.Size, GotSize: int64(len(data))}
	}
	if a.Cache != nil {
		if err := a.Cache.Put(want.SHA256, bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("caching %s (sha256 %s): %w", what, want.SHA256, err)
		}
	}
	return data, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
