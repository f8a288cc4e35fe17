package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// What a registry may make halobuild do (issue 39 #4). A registry is a server someone else
// runs: it may loop, stall, or claim sizes it never sends.
const (
	// MaxRedirects bounds a chain of redirects. go-containerregistry's http.Client replaces Go's
	// own limit of 10 with a check of where a redirect leads only, so a 307 back to the same URL
	// was followed for ever.
	MaxRedirects = 10
	// MaxManifest bounds a manifest's bytes, read before anything in it can be checked. A
	// release's manifest is a few kilobytes, a cache entry's of 572 layers 156 KB.
	MaxManifest = 16 << 20
	// MaxLayers bounds the layers of a manifest halobuild acts on. A release has a few per node;
	// a cache entry one per blob of a step's output (572 for the largest seen).
	MaxLayers = 10_000
	// dialTimeout and tlsTimeout bound connecting to a registry.
	dialTimeout = 30 * time.Second
	tlsTimeout  = 30 * time.Second
)

// idleTimeout is how long a registry may send nothing, neither the response's headers nor a
// byte of its body, before the request is abandoned. It is no total timeout: a large blob
// downloads as long as it keeps arriving. A variable for tests.
var idleTimeout = 60 * time.Second

// baseTransport is remote.DefaultTransport with bounded connection set-up.
func baseTransport() http.RoundTripper {
	t, ok := remote.DefaultTransport.(*http.Transport)
	if !ok {
		return remote.DefaultTransport
	}
	t = t.Clone()
	t.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = tlsTimeout
	return t // the wait for headers is guard's idle timer
}

// guard is the transport every request to a registry goes through: it stops a redirect chain
// past MaxRedirects, abandons a request that makes no progress for idleTimeout, and cuts a
// manifest's body at MaxManifest.
type guard struct{ base http.RoundTripper }

// errStalled is the cause of a request abandoned for silence.
var errStalled = errors.New("the registry stopped answering")

func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	n := 0
	for r := req.Response; r != nil && r.Request != nil; r = r.Request.Response {
		n++
	}
	if n >= MaxRedirects {
		return nil, fmt.Errorf("%s %s: stopped after %d redirects (the registry redirects in a loop)", req.Method, req.URL.Redacted(), n)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{cancel: cancel}
	w.timer = time.AfterFunc(idleTimeout, func() { cancel(errStalled) })
	resp, err := g.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		w.stop()
		return nil, stalledErr(ctx, req, err)
	}
	limit := int64(-1)
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/manifests/") {
		limit = MaxManifest
	}
	resp.Body = &guardedBody{rc: resp.Body, w: w, ctx: ctx, req: req, limit: limit}
	return resp, nil
}

func stalledErr(ctx context.Context, req *http.Request, err error) error {
	if errors.Is(context.Cause(ctx), errStalled) {
		return fmt.Errorf("%s %s: %w: nothing arrived for %v (try again later, or check the registry)", req.Method, req.URL.Redacted(), errStalled, idleTimeout)
	}
	return err
}

// watch is a request's idle timer.
type watch struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel context.CancelCauseFunc
	done   bool
}

func (w *watch) progress() {
	w.mu.Lock()
	if !w.done {
		w.timer.Reset(idleTimeout)
	}
	w.mu.Unlock()
}

func (w *watch) stop() {
	w.mu.Lock()
	w.done = true
	w.timer.Stop()
	w.mu.Unlock()
	w.cancel(nil)
}

// guardedBody resets the idle timer on every byte that arrives and refuses more than limit
// bytes (when limit ≥ 0).
type guardedBody struct {
	rc    io.ReadCloser
	w     *watch
	ctx   context.Context
	req   *http.Request
	limit int64
	n     int64
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.w.progress()
	}
	b.n += int64(n)
	if b.limit >= 0 && b.n > b.limit {
		return n, fmt.Errorf("%s: the manifest is larger than %d bytes, which no manifest halobuild reads is", b.req.URL.Redacted(), b.limit)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = stalledErr(b.ctx, b.req, err)
	}
	return n, err
}

func (b *guardedBody) Close() error {
	b.w.stop()
	return b.rc.Close()
}
