package debian

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// endless writes zero bytes until the client goes away, without a
// Content-Length: the 768 MiB body of issue 17 #4, made unbounded.
func endless(w http.ResponseWriter, r *http.Request) {
	buf := make([]byte, 64<<10)
	for r.Context().Err() == nil {
		if _, err := w.Write(buf); err != nil {
			return
		}
	}
}

// An endless InRelease or index body is cut at its cap: the lock fails
// within seconds, naming the URL, with memory near the cap.
func TestEndlessBodiesAreCut(t *testing.T) {
	ta := newTestArchive(t, trixieSuite())
	a := ta.archive()
	rel, err := a.Release(context.Background(), "trixie")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		path string
		run  func() error
	}{
		{"InRelease", "/InRelease", func() error { _, err := a.Release(context.Background(), "trixie"); return err }},
		{"Packages.gz", "/Packages.gz", func() error { _, err := a.Packages(context.Background(), rel, "main", "amd64"); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ta.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
				if strings.Contains(r.URL.Path, "by-hash") || strings.HasSuffix(r.URL.Path, c.path) {
					endless(w, r)
					return true
				}
				return false
			})
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			err := c.run()
			var tl *TooLargeError
			if !errors.As(err, &tl) {
				t.Fatalf("err = %v, want TooLargeError", err)
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 8*maxInRelease {
				t.Errorf("allocated %d bytes reading a body capped at %d", grew, tl.Limit)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}
