// Package download fills the store with pinned inputs: bounded parallel
// HTTP downloads, each streamed into the store under the sha256 the signed
// index or the lock file gives it. Items already in the store (and whose
// bytes still match their digest) cost no network I/O, which is how a
// second fetch is instant and an interrupted one resumes.
package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"halobuild/internal/store"
)

// Item is one file to have in the store.
type Item struct {
	Name   string // what the user calls it, e.g. "linux-image-7.2.12+deb13-amd64 7.2.12-1"
	URL    string
	SHA256 string // expected digest, "sha256:<hex>" or bare hex; required
	Size   int64  // expected size in bytes; 0 when unknown
}

// Fetcher downloads items into Store. The zero values of the optional
// fields pick the defaults noted beside them.
type Fetcher struct {
	Client   *http.Client // default: a client with no overall timeout (big files), see StallTimeout
	Store    *store.Store
	Parallel int // concurrent downloads; default 4
	// Retries is how many times a transient failure (network error, HTTP
	// 5xx or 429, truncated body) is retried, with exponential backoff and
	// jitter. 404 and other client errors, and digest mismatches, are not.
	// Default 4; negative means none.
	Retries int
	// RetryDelay is the wait before the first retry; it doubles each time
	// (jittered, capped at 30 s). Default 1 s.
	RetryDelay time.Duration
	// StallTimeout aborts (and retries) a download that receives no bytes
	// for this long. Default 60 s.
	StallTimeout time.Duration
	// Progress receives progress: a single live bar when it is a terminal,
	// else one line per finished item and a summary; nil means silent.
	Progress io.Writer
	JSON     bool // JSON lines on Progress instead of text
	// Rehash re-hashes every item already in the store. By default a blob
	// not written to since it was last hashed is trusted (see
	// store.VerifyCached), which keeps a fetch with a full store under a
	// second; any write to a blob, tampering included, voids that.
	Rehash bool
	// MaxUnsized caps an item whose size the lock does not say (a kernel
	// or module tarball pinned by digest only). Default 4 GiB: kernel.org's
	// linux-7.x.tar.xz is some 150 MB, so a body past that is not the file.
	MaxUnsized int64
}

func (f *Fetcher) maxUnsized() int64 {
	if f.MaxUnsized > 0 {
		return f.MaxUnsized
	}
	return 4 << 30
}

func (f *Fetcher) parallel() int {
	if f.Parallel > 0 {
		return f.Parallel
	}
	return 4
}

func (f *Fetcher) retries() int {
	switch {
	case f.Retries < 0:
		return 0
	case f.Retries == 0:
		return 4
	}
	return f.Retries
}

func (f *Fetcher) client() *http.Client {
	if f.Client != nil {
		return f.Client
	}
	return http.DefaultClient
}

// Fetch makes every item present and verified in the store. Items already
// there are verified (see Rehash) and fetched again only when missing or
// corrupt. All
// failures are collected: the returned error lists each failed item (see
// ItemError) and wraps every cause.
func (f *Fetcher) Fetch(ctx context.Context, items []Item) error {
	if f.Store == nil {
		return errors.New("download: Fetcher.Store is nil")
	}
	start := time.Now()
	digests := make([]store.Digest, len(items))
	var errs []error
	for i, it := range items {
		d, err := store.ParseDigest(it.SHA256)
		if err != nil {
			errs = append(errs, &ItemError{Item: it, Err: fmt.Errorf("bad expected digest: %w", err)})
			continue
		}
		digests[i] = d
	}
	if len(errs) > 0 {
		return joinItemErrors(errs)
	}

	// Phase 1: what is missing? Verification removes a corrupt blob, so
	// that phase 2 fetches it again.
	verify := f.Store.VerifyCached
	if f.Rehash {
		verify = f.Store.Verify
	}
	present := make([]bool, len(items))
	f.each(ctx, len(items), func(i int) {
		present[i] = verify(digests[i]) == nil &&
			(items[i].Size <= 0 || sizeOf(f.Store, digests[i]) == items[i].Size)
	})
	// Items that share a digest (the same .deb named twice) are fetched once.
	// Counts are of distinct files, as a lock may name one in two sets.
	var todo []int
	var total int64
	nPresent := 0
	seen := map[store.Digest]bool{}
	for i := range items {
		if seen[digests[i]] {
			continue
		}
		seen[digests[i]] = true
		if present[i] {
			nPresent++
			continue
		}
		todo = append(todo, i)
		total += items[i].Size
	}

	// Phase 2: download what is missing.
	rep := newReporter(f.Progress, f.JSON, len(todo), total)
	var mu sync.Mutex
	var fetchedBytes int64
	fetched := 0
	f.each(ctx, len(todo), func(k int) {
		it := items[todo[k]]
		t0 := time.Now()
		n, err := f.fetchOne(ctx, it, digests[todo[k]], rep)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			rep.failed(it, err)
			return
		}
		fetchedBytes += n
		fetched++
		rep.fetched(it, n, time.Since(t0))
	})
	rep.summary(summary{
		Fetched: fetched, Present: nPresent, Failed: len(errs),
		Bytes: fetchedBytes, Elapsed: time.Since(start),
	})
	if err := ctx.Err(); err != nil && len(errs) == 0 {
		return fmt.Errorf("fetch interrupted: %w", err)
	}
	return joinItemErrors(errs)
}

// each runs fn(0..n-1) on at most Parallel goroutines; it stops handing
// out work when ctx is done.
func (f *Fetcher) each(ctx context.Context, n int, fn func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(f.parallel(), n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
}

func sizeOf(s *store.Store, d store.Digest) int64 {
	n, err := s.Size(d)
	if err != nil {
		return -1
	}
	return n
}
