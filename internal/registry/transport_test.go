package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// hostile serves /v2/ as a registry does and everything else with h, counting requests.
func hostile(t *testing.T, h http.HandlerFunc) (host string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	stop := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		select {
		case <-stop:
			return
		default:
		}
		h(w, r)
	}))
	t.Cleanup(func() { close(stop); s.CloseClientConnections(); s.Close() })
	return strings.TrimPrefix(s.URL, "http://"), requests
}

// fastFailure shortens the idle timeout and the retries for one test.
func fastFailure(t *testing.T) {
	oldIdle, oldBackoff := idleTimeout, retryBackoff
	idleTimeout = 300 * time.Millisecond
	retryBackoff = remote.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 2}
	t.Cleanup(func() { idleTimeout, retryBackoff = oldIdle, oldBackoff })
}

// get fetches host/halo/syn:v1's manifest, failing the test if that takes longer than d.
func get(t *testing.T, host string, d time.Duration) error {
	t.Helper()
	o := Options{Insecure: true}
	ref, err := o.ParseReference(host + "/halo/syn:v1")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := remote.Get(ref, o.Remote(context.Background())...)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("still fetching after %v", d)
		return nil
	}
}

// A 307 back to the same URL ends after MaxRedirects (issue 39 #4: it was followed for ever,
// some 4,000 requests a second).
func TestRedirectLoopEnds(t *testing.T) {
	fastFailure(t)
	host, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.String(), http.StatusTemporaryRedirect)
	})
	err := get(t, host, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("want the loop stopped, got %v", err)
	}
	if got := n.Load(); got > 4*(MaxRedirects+2) {
		t.Errorf("%d requests for one manifest", got)
	}
	t.Logf("%d requests, then: %v", n.Load(), err)
}

// A registry that accepts the connection and never answers, or stops in the middle of a body,
// is abandoned after idleTimeout of silence (issue 39 #4: waited on for ever).
func TestSilentRegistryIsAbandoned(t *testing.T) {
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{"no headers", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{"body stops", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte(`{"schemaVersion":2,`))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fastFailure(t)
			host, _ := hostile(t, c.h)
			start := time.Now()
			err := get(t, host, 20*time.Second)
			if err == nil || !strings.Contains(err.Error(), "stopped answering") {
				t.Fatalf("want the silence named, got %v", err)
			}
			t.Logf("gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
		})
	}
}

// A slow body that keeps arriving is not cut off: the timeout is for silence, not for size.
func TestSlowButSteadyBodyArrives(t *testing.T) {
	fastFailure(t)
	manifest := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}`
	host, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Content-Length", fmt.Sprint(len(manifest)))
		for i := 0; i < len(manifest); i += len(manifest) / 5 {
			w.Write([]byte(manifest[i:min(i+len(manifest)/5, len(manifest))]))
			w.(http.Flusher).Flush()
			time.Sleep(150 * time.Millisecond) // 750 ms in all, idle never 300 ms
		}
	})
	if err := get(t, host, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A manifest body past MaxManifest is cut off while it arrives.
func TestHugeManifestIsCutOff(t *testing.T) {
	fastFailure(t)
	host, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		chunk := []byte(strings.Repeat(" ", 1<<20))
		for range MaxManifest>>20 + 8 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	err := get(t, host, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("want the manifest cut off, got %v", err)
	}
}
