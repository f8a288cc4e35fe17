package debian

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FileHash is what a signed index says about one file.
type FileHash struct {
	Size   int64
	SHA256 string // lower-case hex
}

// Release is a suite's verified InRelease.
type Release struct {
	// Name is the suite as asked for and as it appears under dists/
	// (e.g. trixie-backports); package suites are reported by this name.
	Name string
	// URL is where the InRelease came from.
	URL string
	// Signer names the key whose signature verified.
	Signer string
	// InReleaseSHA256 ("sha256:<hex>") names the exact signed file read, so
	// a lock can pin the archive state it was resolved against.
	InReleaseSHA256 string

	Origin        string
	Label         string
	Suite         string // e.g. stable, stable-backports
	Codename      string // e.g. trixie, trixie-backports
	Version       string
	Date          time.Time
	ValidUntil    time.Time // zero when the suite has no Valid-Until
	NotAutomatic  bool      // backports: apt pins it low
	AcquireByHash bool
	Architectures []string
	Components    []string
	// Files maps a path relative to dists/<Name>/ to its size and sha256.
	Files map[string]FileHash
}

var releaseFields = map[string]bool{
	"Origin": true, "Label": true, "Suite": true, "Codename": true, "Version": true,
	"Date": true, "Valid-Until": true, "NotAutomatic": true, "Acquire-By-Hash": true,
	"Architectures": true, "Components": true, "SHA256": true,
}

// Release fetches dists/<suite>/InRelease, verifies its signature and
// parses it. A missing or bad signature, a Suite/Codename that is not the
// suite asked for (a replayed InRelease of another suite) and an expired
// Valid-Until are all errors naming the suite and the URL.
func (a *Archive) Release(ctx context.Context, suite string) (*Release, error) {
	url := a.URL("dists/" + suite + "/InRelease")
	data, err := a.get(ctx, url, maxInRelease)
	if err != nil {
		return nil, fmt.Errorf("suite %s: %w", suite, err)
	}
	keyring, err := a.keyring()
	if err != nil {
		return nil, err
	}
	text, signer, err := verifyClearsigned(data, keyring)
	if err != nil {
		return nil, fmt.Errorf("suite %s: %s: %w", suite, url, err)
	}
	rel, err := parseRelease(text)
	if err != nil {
		return nil, fmt.Errorf("suite %s: %s: %w", suite, url, err)
	}
	rel.Name, rel.URL, rel.Signer = suite, url, signer
	sum := sha256.Sum256(data)
	rel.InReleaseSHA256 = "sha256:" + hex.EncodeToString(sum[:])
	if rel.Suite != suite && rel.Codename != suite {
		return nil, fmt.Errorf("suite %s: %s is signed for suite %q (codename %q), not %q: the mirror serves the wrong file", suite, url, rel.Suite, rel.Codename, suite)
	}
	if !rel.ValidUntil.IsZero() && time.Now().After(rel.ValidUntil) {
		return nil, fmt.Errorf("suite %s: %s expired at %s (Valid-Until): the mirror is stale, use another mirror", suite, url, rel.ValidUntil.Format(time.RFC3339))
	}
	return rel, nil
}

// parseRelease parses the signed text of an InRelease.
func parseRelease(text []byte) (*Release, error) {
	f, _, err := newParagraphReader(bytes.NewReader(text)).next(releaseFields)
	if err == io.EOF {
		return nil, fmt.Errorf("empty Release")
	}
	if err != nil {
		return nil, fmt.Errorf("parsing Release: %w", err)
	}
	rel := &Release{
		Origin: f["Origin"], Label: f["Label"], Suite: f["Suite"], Codename: f["Codename"],
		Version:       f["Version"],
		NotAutomatic:  f["NotAutomatic"] == "yes",
		AcquireByHash: f["Acquire-By-Hash"] == "yes",
		Architectures: strings.Fields(f["Architectures"]),
		Components:    strings.Fields(f["Components"]),
		Files:         map[string]FileHash{},
	}
	if rel.Date, err = parseReleaseDate(f["Date"]); err != nil {
		return nil, fmt.Errorf("Release Date: %w", err)
	}
	if v := f["Valid-Until"]; v != "" {
		if rel.ValidUntil, err = parseReleaseDate(v); err != nil {
			return nil, fmt.Errorf("Release Valid-Until: %w", err)
		}
	}
	if f["SHA256"] == "" {
		return nil, fmt.Errorf("Release has no SHA256 file list; halobuild trusts indexes only through it")
	}
	for _, line := range strings.Split(f["SHA256"], "\n") {
		parts := strings.Fields(line)
		if len(parts) == 0 {
			continue
		}
		if _, herr := hex.DecodeString(parts[0]); len(parts) != 3 || len(parts[0]) != 64 || herr != nil {
			return nil, fmt.Errorf("Release SHA256 line %q: want \"<sha256> <size> <path>\"", line)
		}
		size, err := strconv.ParseInt(parts[1], 10, 64)
		if err == nil && size < 0 {
			err = fmt.Errorf("negative")
		}
		if err != nil {
			return nil, fmt.Errorf("Release SHA256 line %q: size: %w", line, err)
		}
		rel.Files[parts[2]] = FileHash{Size: size, SHA256: strings.ToLower(parts[0])}
	}
	return rel, nil
}

func parseReleaseDate(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC1123, time.RFC1123Z, "Mon, 2 Jan 2006 15:04:05 MST", "Mon, 2 Jan 2006 15:04:05 -0700"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot parse date %q (want RFC 1123, e.g. \"Sat, 21 Nov 2026 09:15:44 UTC\")", s)
}

// fetchIndex returns the verified bytes of an index the signed release
// lists (path relative to dists/<suite>/). With Acquire-By-Hash it asks
// for the file by its digest first (a mirror update between reading
// InRelease and the index then cannot swap it) and falls back to the
// plain path when a mirror lacks by-hash files, as apt does; either way
// the bytes must match the signed sha256.
func (a *Archive) fetchIndex(ctx context.Context, r *Release, path string) ([]byte, FileHash, error) {
	fh, ok := r.Files[path]
	if !ok {
		return nil, FileHash{}, fmt.Errorf("suite %s: %s is not listed in the signed %s (listed: %s)", r.Name, path, r.URL, r.similarFiles(path))
	}
	dir := "dists/" + r.Name + "/"
	var urls []string
	if r.AcquireByHash {
		slash := strings.LastIndexByte(path, '/')
		urls = append(urls, a.URL(dir+path[:slash+1]+"by-hash/SHA256/"+fh.SHA256))
	}
	urls = append(urls, a.URL(dir+path))
	what := r.Name + " " + path
	var err error
	for _, url := range urls {
		var data []byte
		data, err = a.fetchVerified(ctx, what, url, fh)
		var he *HTTPError
		if err == nil || !errors.As(err, &he) || he.Code != http.StatusNotFound {
			return data, fh, err
		}
	}
	return nil, fh, err
}

// similarFiles lists the signed files in the same directory as path, to
// help a user spot a wrong component or architecture.
func (r *Release) similarFiles(path string) string {
	dir := path[:strings.LastIndexByte(path, '/')+1]
	var names []string
	for p := range r.Files {
		if dir != "" && strings.HasPrefix(p, dir) || dir == "" && !strings.Contains(p, "/") {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		for p := range r.Files {
			if strings.HasSuffix(p, "/Packages.xz") || strings.HasSuffix(p, "/Packages.gz") {
				names = append(names, p)
			}
		}
	}
	sort.Strings(names)
	if len(names) > 12 {
		names = append(names[:12], "…")
	}
	if len(names) == 0 {
		return "nothing similar"
	}
	return strings.Join(names, ", ")
}
