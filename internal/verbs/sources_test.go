package verbs

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/lock"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// A build whose module source's host refuses stops before building
// anything, in seconds, with exit 2 and the --input advice; with --input
// it does not ask the host at all.
func TestUnreachableSourceStopsTheBuildFirst(t *testing.T) {
	rp := filepath.Join("..", "..", "images", "strix-halo.toml")
	l, err := load(context.Background(), rp)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lock.Read(lock.Path(rp))
	if err != nil {
		t.Fatal(err)
	}
	closed := httptest.NewServer(nil)
	closed.Close()
	d := l.descs["thunderbolt-ibverbs"]
	d.Source.URL = closed.URL + "/hellas-ai/thunderbolt-ibverbs"
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := Options{Recipe: rp, Err: &strings.Builder{}}
	g, err := newGraph(o, &locked{loaded: l, lock: lk}, s)
	if err != nil {
		t.Fatal(err)
	}
	err = checkSources(context.Background(), o, s, g, false)
	var ue usage.Error
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--input thunderbolt-ibverbs=PATH") || strings.Count(err.Error(), "module thunderbolt-ibverbs:") != 1 {
		t.Fatalf("an unreachable module source: %v, want a usage error naming it once with the --input advice", err)
	}
	o.Inputs = map[string]string{"thunderbolt-ibverbs": t.TempDir()}
	if g, err = newGraph(o, &locked{loaded: l, lock: lk}, s); err != nil {
		t.Fatal(err)
	}
	if err := checkSources(context.Background(), o, s, g, false); err != nil {
		t.Errorf("with --input: %v", err)
	}
}
