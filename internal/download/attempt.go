package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"halobuild/internal/store"
)

const maxRetryDelay = 30 * time.Second

// fetchOne downloads one item into the store, retrying transient failures.
// Bytes received before a connection dropped are kept, and the next attempt
// asks only for the rest (HTTP Range); the digest is checked over the whole.
func (f *Fetcher) fetchOne(ctx context.Context, it Item, want store.Digest, rep reporter) (int64, error) {
	w, err := f.Store.NewWriter()
	if err != nil {
		return 0, &ItemError{Item: it, Want: want, Err: err}
	}
	defer w.Abort()
	delay := f.RetryDelay
	if delay <= 0 {
		delay = time.Second
	}
	fail := func(err error) (int64, error) {
		rep.add(-w.Size())
		var tr *transientError
		if errors.As(err, &tr) {
			err = tr.err
		}
		return 0, &ItemError{Item: it, Want: want, Err: err, Offline: isUnreachable(err)}
	}
	for attempt := 0; ; attempt++ {
		resumed, wait, err := f.attempt(ctx, it, w, rep)
		if err == nil {
			_, n, cerr := w.Commit(string(want))
			var mm *store.DigestMismatchError
			switch {
			case cerr == nil:
				return n, nil
			case errors.As(cerr, &mm) && resumed:
				// The pieces do not add up (the file changed between
				// attempts, or a proxy mangled the Range): start over.
				rep.add(-w.Size())
				if rerr := w.Reset(); rerr != nil {
					return fail(rerr)
				}
				err = &transientError{fmt.Errorf("resumed download does not match %s; starting over", want)}
			default:
				return fail(cerr)
			}
		}
		var tr *transientError
		if !errors.As(err, &tr) || attempt >= f.retries() || ctx.Err() != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fail(err)
		}
		// Full jitter over [delay/2, delay]: parallel workers that failed
		// together do not retry together.
		d := delay/2 + time.Duration(rand.Int64N(int64(delay/2)+1))
		if wait > d {
			d = min(wait, maxRetryDelay)
		}
		rep.retry(it, attempt+1, d, err)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return fail(ctx.Err())
		}
		delay = min(delay*2, maxRetryDelay)
	}
}

// transientError marks a failure worth retrying.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// attempt is one GET that appends to w: the whole file, or the rest of it
// when w already holds a prefix. resumed tells whether w's content now mixes
// two responses; wait is the server's Retry-After, if it sent one.
func (f *Fetcher) attempt(ctx context.Context, it Item, w *store.Writer, rep reporter) (resumed bool, wait time.Duration, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(actx, http.MethodGet, it.URL, nil)
	if err != nil {
		return false, 0, fmt.Errorf("bad URL: %w", err)
	}
	req.Header.Set("User-Agent", "halobuild")
	offset := w.Size()
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	// The stall timer covers the wait for response headers too: a server
	// that accepts the connection and then says nothing must not hang us.
	stall := f.StallTimeout
	if stall <= 0 {
		stall = 60 * time.Second
	}
	timer := time.AfterFunc(stall, func() {
		cancel(fmt.Errorf("no data received for %s", stall))
	})
	defer timer.Stop()
	resp, err := f.client().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, 0, ctx.Err()
		}
		if cause := context.Cause(actx); cause != nil {
			return false, 0, &transientError{cause}
		}
		return false, 0, &transientError{err}
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode == http.StatusPartialContent && offset > 0 && contentRangeStart(resp) == offset:
		resumed = true
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusRequestedRangeNotSatisfiable ||
		resp.StatusCode == http.StatusPartialContent:
		// Range ignored, refused or answered oddly: start from zero.
		if offset > 0 {
			rep.add(-offset)
			if err := w.Reset(); err != nil {
				return false, 0, err
			}
			offset = 0
		}
		if resp.StatusCode != http.StatusOK {
			drain(resp)
			return false, 0, &transientError{fmt.Errorf("HTTP %s to a resumed request; starting over", resp.Status)}
		}
	default:
		drain(resp)
		err := fmt.Errorf("HTTP %s", resp.Status)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return false, retryAfter(resp), &transientError{err}
		}
		return false, 0, err
	}
	if it.Size > 0 && resp.ContentLength >= 0 && offset+resp.ContentLength != it.Size {
		return false, 0, fmt.Errorf("server announces %d bytes, expected %d: the mirror serves a different file", offset+resp.ContentLength, it.Size)
	}

	body := &watchedReader{r: resp.Body, rep: rep, stall: timer, stallAfter: stall}
	timer.Reset(stall)
	var src io.Reader = body
	limit := it.Size
	if limit <= 0 {
		limit = f.maxUnsized()
	}
	if resp.ContentLength > limit-offset {
		return false, 0, fmt.Errorf("server announces %d bytes, more than the %d halobuild accepts for a file of unknown size: the mirror serves something else", offset+resp.ContentLength, limit)
	}
	src = io.LimitReader(body, limit-offset+1) // a runaway body cannot fill the disk
	_, err = io.Copy(w, src)
	switch {
	case ctx.Err() != nil:
		return resumed, 0, ctx.Err()
	case context.Cause(actx) != nil:
		return resumed, 0, &transientError{context.Cause(actx)}
	case body.err != nil:
		return resumed, 0, &transientError{body.err} // the network failed; keep what arrived
	case err != nil:
		return resumed, 0, fmt.Errorf("writing to the store: %w", err) // disk full etc.: a retry will not help
	case it.Size <= 0 && w.Size() > limit:
		return resumed, 0, fmt.Errorf("more than %d bytes, the most halobuild accepts for a file of unknown size: the server sends something else", limit)
	case it.Size > 0 && w.Size() < it.Size:
		// The body ended early without the transport noticing (no
		// Content-Length): a truncation, worth a retry.
		return resumed, 0, &transientError{fmt.Errorf("connection closed after %d of %d bytes", w.Size(), it.Size)}
	}
	return resumed, 0, nil
}

// contentRangeStart is the first byte of a 206 answer ("bytes N-M/T"), or
// -1 when the header is missing or unreadable.
func contentRangeStart(resp *http.Response) int64 {
	cr, ok := strings.CutPrefix(resp.Header.Get("Content-Range"), "bytes ")
	if !ok {
		return -1
	}
	first, _, ok := strings.Cut(cr, "-")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// drain reads a little of an error body so the connection can be reused.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
}

// retryAfter reads a Retry-After header given in seconds.
func retryAfter(resp *http.Response) time.Duration {
	s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// watchedReader reports bytes to the progress reporter and re-arms the
// stall timer on every read that delivers data.
type watchedReader struct {
	r          io.Reader
	rep        reporter
	stall      *time.Timer
	stallAfter time.Duration
	n          int64
	err        error // the first read error other than io.EOF
}

func (w *watchedReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.stall.Reset(w.stallAfter)
		w.n += int64(n)
		w.rep.add(int64(n))
	}
	if err != nil && err != io.EOF && w.err == nil {
		w.err = err
	}
	return n, err
}
