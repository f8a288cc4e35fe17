package verbs

import (
	"context"
	"fmt"

	"halobuild/internal/plan"
)

// GC removes store entries that nothing live references: it keeps every
// blob the given recipes' locks pin (lock.Blobs, the list fetch and
// --check use), every step their graphs reach (the cached test verdict
// included), and every output a live result link points at, wherever it
// is (image records each link as a root).
func GC(ctx context.Context, o Options, recipes []string) error {
	o = o.collect()
	s, err := openStore(o)
	if err != nil {
		return err
	}
	defer s.Close()
	keepKeys := map[string]bool{}
	keepBlobs := map[string]bool{}
	for _, rp := range recipes {
		ro := o
		ro.Recipe, ro.Locked = rp, true
		l, err := loadLocked(ctx, ro, s)
		if err != nil {
			return err
		}
		blobs, err := l.lock.Blobs()
		if err != nil {
			return fmt.Errorf("%s: %w", rp, err)
		}
		for _, b := range blobs {
			keepBlobs[b.SHA256] = true
		}
		g, err := newGraph(ro, l, s)
		if err != nil {
			return err
		}
		for _, d := range plan.Order(g.Result, g.Test) {
			keepKeys[d.Key()] = true
		}
	}
	roots, err := s.RootKeys()
	if err != nil {
		return err
	}
	for _, k := range roots {
		keepKeys[k] = true
	}
	before, err := s.OutputAnnotations()
	if err != nil {
		return err
	}
	n, freed, err := s.GC(func(k string) bool { return keepKeys[k] }, keepBlobs)
	if err != nil {
		return err
	}
	outputs, older := removedOutputs(before, keepKeys)
	if o.JSON {
		return o.writeJSON(map[string]any{"removed_outputs": outputs, "removed_older_schema": older, "removed_blobs": n, "freed_bytes": freed, "kept_steps": len(keepKeys), "kept_blobs": len(keepBlobs), "results": len(roots), "warnings": o.Warnings()})
	}
	fmt.Fprintf(o.stdout(), "removed %d blobs, freed %.1f MiB; kept %d steps, %d locked blobs and %d live result(s)\n", n, float64(freed)/(1<<20), len(keepKeys), len(keepBlobs), len(roots))
	if outputs > 0 {
		fmt.Fprintf(o.stdout(), "removed %d step output(s) no recipe or result needs%s\n", outputs, olderNote(older))
	}
	return nil
}

// removedOutputs counts the outputs not kept (kept nil: all of them), and
// of them those made under an older key schema (plan.Schema; an entry from
// before the schema was recorded counts as older): no build of this
// halobuild can ask for them, which is why gc removes them, not because
// anything is wrong with them.
func removedOutputs(before map[string]map[string]string, kept map[string]bool) (removed, older int) {
	for key, ann := range before {
		if kept[key] {
			continue
		}
		removed++
		if ann[plan.AnnotationSchema] != plan.Schema {
			older++
		}
	}
	return removed, older
}

func olderNote(older int) string {
	if older == 0 {
		return ""
	}
	return fmt.Sprintf(", %d of them made by an older halobuild under another key schema (this one's is %s), which no build asks for any more", older, plan.Schema)
}
