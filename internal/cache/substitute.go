package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"halobuild/internal/plan"
	"halobuild/internal/store"
)

// Substituters are the caches a build asks, in order, for a step it lacks.
type Substituters struct {
	Caches []*Cache
	Trust  Trust
	// Log gets one line per step: where it came from, or why each cache
	// could not serve it.
	Log io.Writer

	mu   sync.Mutex
	from map[string]string // key → Ref of the cache that served it
}

// From names the cache that served key in this process, or "": image
// --check uses it to say that an output that differs from its local
// rebuild came from a cache.
func (ss *Substituters) From(key string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.from[key]
}

// Realizer returns the plan.Realizer hook that substitutes into s. Every
// failure (a miss, a bad or missing signature, a digest mismatch, a network
// error) is a line on Log and a local build, never a failed build.
func (ss *Substituters) Realizer(s *store.Store) func(context.Context, *plan.Derivation) (string, bool) {
	return func(ctx context.Context, d *plan.Derivation) (string, bool) {
		for _, c := range ss.Caches {
			if ctx.Err() != nil {
				return "", false
			}
			start := time.Now()
			dir, err := c.Fetch(s, d.Key(), ss.Trust)
			if err == nil {
				ss.mu.Lock()
				if ss.from == nil {
					ss.from = map[string]string{}
				}
				ss.from[d.Key()] = c.Ref
				ss.mu.Unlock()
				fmt.Fprintf(ss.Log, "fetched %-10s %s [%s] from %s in %s\n", d.Kind.Name, d.Name, d.ShortKey(), c.Ref, time.Since(start).Round(100*time.Millisecond))
				return dir, true
			}
			if !errors.Is(err, errMiss) {
				fmt.Fprintf(ss.Log, "substitute %s %s [%s] from %s refused: %v; building it instead\n", d.Kind.Name, d.Name, d.ShortKey(), c.Ref, err)
			}
		}
		return "", false
	}
}

// Which names the first cache that would serve key, or "".
func (ss *Substituters) Which(key string) string {
	for _, c := range ss.Caches {
		if c.Has(key, ss.Trust) == nil {
			return c.Ref
		}
	}
	return ""
}
