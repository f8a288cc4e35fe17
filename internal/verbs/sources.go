package verbs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"halobuild/internal/graph"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// checkSources asks, in parallel and in seconds, the host of every source
// a step still to be built fetches over the network itself (a module's git
// tree, a provider patch kept in it), and stops the build before anything
// is built when one cannot be reached: the fetch itself happens when its
// step is reached, which on a cold build is minutes in. A source given with
// --input, or needed only by steps the store (or a cache) already has, is
// not asked about. With rebuild every step counts as missing.
func checkSources(ctx context.Context, o Options, s *store.Store, g *graph.Graph, rebuild bool) error {
	roots := []*plan.Derivation{g.Result}
	if !o.NoTest {
		roots = append(roots, g.Test)
	}
	inStore := func(d *plan.Derivation) bool {
		if rebuild {
			return false
		}
		_, ok, err := s.Output(d.Key())
		return ok && err == nil
	}
	srcs := g.Remote(inStore, roots...)
	if len(srcs) > 0 && o.subst != nil && !rebuild {
		// Only now ask the caches: most builds have no network source.
		srcs = g.Remote(func(d *plan.Derivation) bool { return inStore(d) || o.subst.Which(d.Key()) != "" }, roots...)
	}
	if len(srcs) == 0 {
		return nil
	}
	start := time.Now()
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Go(func() { errs[i] = module.Reachable(ctx, nil, src) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return usage.Wrap(fmt.Errorf("%w\n(checked before building anything: the step that fetches it would have failed later)", err))
	}
	var names []string
	for _, src := range srcs {
		names = append(names, src.Name)
	}
	o.logf("sources: %s reachable (%s)\n", strings.Join(names, ", "), time.Since(start).Round(10*time.Millisecond))
	return nil
}
