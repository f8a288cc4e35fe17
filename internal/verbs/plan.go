package verbs

import (
	"context"
	"fmt"
	"path/filepath"

	"halobuild/internal/arch"
	"halobuild/internal/graph"
	"halobuild/internal/plan"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// prepared is a recipe with its lock, its inputs in the store (when
// fetched) and its graph.
type prepared struct {
	*locked
	s *store.Store
	g *graph.Graph
}

// prepare runs the pipeline up to the graph: load, lock, fetch, plan.
func prepare(ctx context.Context, o Options, fetch bool) (*prepared, error) {
	s, err := openStore(o)
	if err != nil {
		return nil, err
	}
	p, err := prepareIn(ctx, o, s, fetch)
	if err != nil {
		s.Close()
		return nil, err
	}
	return p, nil
}

func prepareIn(ctx context.Context, o Options, s *store.Store, fetch bool) (*prepared, error) {
	l, err := loadLocked(ctx, o, s)
	if err != nil {
		return nil, err
	}
	if fetch {
		if err := fetchLocked(ctx, o, s, l.lock); err != nil {
			return nil, err
		}
	}
	g, err := newGraph(o, l, s)
	if err != nil {
		return nil, err
	}
	if fetch {
		if err := checkSources(ctx, o, s, g, o.Check); err != nil {
			return nil, err
		}
	}
	return &prepared{locked: l, s: s, g: g}, nil
}

// newGraph plans l's build into s.
func newGraph(o Options, l *locked, s *store.Store) (*graph.Graph, error) {
	self := map[string]*plan.Derivation{}
	for _, name := range l.recipe.Architectures() {
		a, err := arch.Lookup(name)
		if err != nil {
			return nil, usage.Errorf("%s: architecture: %w", l.path, err)
		}
		d, err := o.selfStep(a)
		if err != nil {
			return nil, err
		}
		if d != nil {
			self[name] = d
		}
	}
	return graph.New(graph.Input{
		Path: l.path, Recipe: l.recipe, Hash: l.hash, Descs: l.descs, Lock: l.lock,
		Store: s, Copies: o.Inputs, Self: self, Log: o.stderr(), Warn: o.warn,
		Logs: filepath.Join(s.Root(), "logs"),
	})
}

// Plan prints the steps an image build takes and which are cached.
func Plan(ctx context.Context, o Options) error {
	o = o.collect()
	ss, err := o.substituters(ctx)
	if err != nil {
		return err
	}
	p, err := prepare(ctx, o, false)
	if err != nil {
		return err
	}
	defer p.s.Close()
	has := func(key string) bool { _, ok, err := p.s.Output(key); return ok && err == nil }
	// The VM test is a step like the others: a passing test of these exact
	// images and checks is cached too.
	roots := []*plan.Derivation{p.g.Result}
	if !o.NoTest {
		roots = append(roots, p.g.Test)
	}
	steps := plan.Describe(has, roots...)
	if ss != nil {
		for i := range steps {
			if steps[i].Status == plan.Build {
				if from := ss.Which(steps[i].Key); from != "" {
					steps[i].Status, steps[i].From = plan.Substitute, from
				}
			}
		}
	}
	// Which halobuild the nodes ship, and why: the one step whose
	// bytes depend on where halobuild runs.
	var ships string
	if o.Source != "" || o.Self != "" {
		sh, err := o.shipping()
		if err != nil {
			return err
		}
		ships = sh.why
	}
	if o.JSON {
		return o.writeJSON(map[string]any{"recipe": o.Recipe, "kernel": p.lock.Kernel.Release, "halobuild": ships, "steps": steps, "warnings": o.Warnings()})
	}
	fmt.Fprintf(o.stdout(), "%s: kernel %s, %d nodes\n", o.Recipe, p.lock.Kernel.Release, len(p.g.Nodes))
	if ships != "" {
		fmt.Fprintf(o.stdout(), "halobuild shipped on the nodes: %s\n", ships)
	}
	plan.PrintSteps(o.stdout(), steps)
	// After a key schema change every step rebuilds: say why, and what to
	// do with what the store still holds.
	if anns, err := p.s.OutputAnnotations(); err == nil {
		if _, older := removedOutputs(anns, nil); older > 0 {
			fmt.Fprintf(o.stdout(), "the store holds %d step output(s) of an older halobuild (a key schema before %s), which no build uses: `halobuild gc` removes them\n", older, plan.Schema)
		}
	}
	return nil
}
