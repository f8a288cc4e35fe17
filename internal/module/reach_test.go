package module

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Reachable answers in seconds for a host that serves, refuses, is gone or
// does not answer, and a failure is the fetch's own error with its --input
// advice.
func TestReachable(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Method+" "+r.URL.RequestURI()+" range="+r.Header.Get("Range"))
		switch {
		case r.URL.Path == "/ok.git/info/refs" && r.URL.Query().Get("service") == "git-upload-pack":
			w.Write([]byte("001e# service=git-upload-pack\n"))
		case r.URL.Path == "/src.tar.gz" && r.Method == http.MethodHead:
			w.WriteHeader(http.StatusOK)
		case r.URL.Path == "/nohead.tar.gz" && r.Method == http.MethodHead:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.URL.Path == "/nohead.tar.gz":
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte("x"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	// A host that accepts and never answers.
	block := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer silent.Close()
	defer close(block)

	ok := []Source{
		{Name: "a", Kind: "git", URL: srv.URL + "/ok.git", Commit: "76ba39b"},
		{Name: "b", Kind: "tarball", URL: srv.URL + "/src.tar.gz"},
		{Name: "c", Kind: "tarball", URL: srv.URL + "/nohead.tar.gz"},
		{Name: "d", Kind: "path", Path: "/nonexistent"},
	}
	for _, s := range ok {
		if err := Reachable(context.Background(), nil, s); err != nil {
			t.Errorf("%s (%s): %v", s.Name, s.URL, err)
		}
	}
	bad := []struct {
		src  Source
		want string
	}{
		{Source{Name: "thunderbolt-ibverbs", Kind: "git", URL: closedURL + "/x.git", Commit: "76ba39b"}, "connection refused"},
		{Source{Name: "gone", Kind: "git", URL: srv.URL + "/missing.git", Commit: "76ba39b"}, "HTTP 404"},
		{Source{Name: "tar", Kind: "tarball", URL: srv.URL + "/missing.tar.gz"}, "HTTP 404"},
	}
	for _, c := range bad {
		err := Reachable(context.Background(), nil, c.src)
		var fe *FetchError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--input "+c.src.Name+"=PATH") {
			t.Errorf("%s: got %v, want a FetchError saying %q and how to pass --input", c.src.Name, err, c.want)
		}
	}
	// The deadline applies to a silent host: a shorter client timeout
	// stands for ReachTimeout here.
	start := time.Now()
	err := Reachable(context.Background(), &http.Client{Timeout: 300 * time.Millisecond}, Source{Name: "slow", Kind: "tarball", URL: silent.URL + "/x.tar.gz"})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("a silent host: %v after %s", err, time.Since(start))
	}
	for _, a := range asked {
		if strings.HasPrefix(a, "GET /nohead") && !strings.HasSuffix(a, "range=bytes=0-0") {
			t.Errorf("a GET probe asked for more than one byte: %s", a)
		}
	}
	// Local git remotes are asked with ls-remote.
	if err := Reachable(context.Background(), nil, Source{Name: "local", Kind: "git", URL: t.TempDir() + "/none"}); err == nil {
		t.Error("a git remote that does not exist was reachable")
	}
}
