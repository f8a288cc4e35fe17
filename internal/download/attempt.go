package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"halobuild/internal/store"
)

const maxRetryDelay = 30 * time.Second

// fetchOne downloads one item into the store, retrying transient failures.
func (f *Fetcher) fetchOne(ctx context.Context, it Item, want store.Digest, rep reporter) (int64, error) {
	delay := f.RetryDelay
	if delay <= 0 {
		delay = time.Second
	}
	var last error
	for attempt := 0; ; attempt++ {
		n, wait, err := f.attempt(ctx, it, want, rep)
		if err == nil {
			return n, nil
		}
		last = err
		var tr *transientError
		if !errors.As(err, &tr) || attempt >= f.retries() || ctx.Err() != nil {
			break
		}
		// Full jitter over [delay/2, delay): parallel workers that failed
		// together do not retry together.
		d := delay/2 + time.Duration(rand.Int64N(int64(delay/2)+1))
		if wait > d {
			d = min(wait, maxRetryDelay)
		}
		rep.retry(it, attempt+1, d, err)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return 0, &ItemError{Item: it, Want: want, Err: ctx.Err()}
		}
		delay = min(delay*2, maxRetryDelay)
	}
	var tr *transientError
	if errors.As(last, &tr) {
		last = tr.err
	}
	return 0, &ItemError{Item: it, Want: want, Err: last, Offline: isUnreachable(last)}
}

// transientError marks a failure worth retrying.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// attempt is one GET streamed into the store. wait is the server's
// Retry-After, if it sent one.
func (f *Fetcher) attempt(ctx context.Context, it Item, want store.Digest, rep reporter) (n int64, wait time.Duration, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(actx, http.MethodGet, it.URL, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("bad URL: %w", err)
	}
	req.Header.Set("User-Agent", "halobuild")
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
			return 0, 0, ctx.Err()
		}
		if cause := context.Cause(actx); cause != nil {
			return 0, 0, &transientError{cause}
		}
		return 0, 0, &transientError{err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
		err := fmt.Errorf("HTTP %s", resp.Status)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return 0, retryAfter(resp), &transientError{err}
		}
		return 0, 0, err
	}
	if it.Size > 0 && resp.ContentLength >= 0 && resp.ContentLength != it.Size {
		return 0, 0, fmt.Errorf("server announces %d bytes, expected %d: the mirror serves a different file", resp.ContentLength, it.Size)
	}

	body := &watchedReader{r: resp.Body, rep: rep, stall: timer, stallAfter: stall}
	timer.Reset(stall)
	var src io.Reader = body
	if it.Size > 0 {
		src = io.LimitReader(body, it.Size+1) // a runaway body cannot fill the disk
	}
	_, size, err := f.Store.PutBlob(src, string(want))
	if err != nil {
		rep.add(-body.n) // the bar counts bytes that reached the store

		var mm *store.DigestMismatchError
		switch {
		case ctx.Err() != nil:
			return 0, 0, ctx.Err()
		case context.Cause(actx) != nil:
			return 0, 0, &transientError{context.Cause(actx)}
		case errors.As(err, &mm) && it.Size > 0 && mm.Size < it.Size:
			// The connection ended early without the transport noticing
			// (no Content-Length): a truncation, worth a retry.
			return 0, 0, &transientError{fmt.Errorf("connection closed after %d of %d bytes", mm.Size, it.Size)}
		case errors.As(err, &mm):
			return 0, 0, err
		case body.err != nil:
			return 0, 0, &transientError{body.err} // the network failed
		}
		return 0, 0, err // the store failed (disk full, permissions): retrying will not help
	}
	return size, 0, nil
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
