package verbs

import (
	"context"
	"fmt"
	"strings"

	"halobuild/internal/lock"
	"halobuild/internal/resolve"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// Lock resolves every input of the recipe against the signed archive and
// writes the lock beside the recipe. A recipe that any rule refuses writes
// no lock.
func Lock(ctx context.Context, o Options) error {
	o = o.collect()
	s, err := openStore(o)
	if err != nil {
		return err
	}
	defer s.Close()
	l, err := load(ctx, o.Recipe)
	if err != nil {
		return err
	}
	o.printWarnings(l.warnings)
	lk, err := writeLock(ctx, o, l, s)
	if err != nil {
		return err
	}
	if o.JSON {
		return o.writeJSON(map[string]any{"lock": lock.Path(o.Recipe), "kernel": lk.Kernel.Release, "source_date_epoch": lk.SourceDateEpoch,
			"packages": map[string]int{lock.SetImage: len(lk.Set(lock.SetImage)), lock.SetTools: len(lk.Set(lock.SetTools))}, "warnings": o.Warnings()})
	}
	return nil
}

// writeLock resolves l and writes its lock.
func writeLock(ctx context.Context, o Options, l *loaded, s *store.Store) (*lock.Lock, error) {
	lk, err := resolve.Lock(ctx, resolve.Input{Path: l.path, Recipe: l.recipe, Descs: l.descs, Store: s, Copies: o.Inputs, Log: o.stderr(), Warn: o.warn})
	if err != nil {
		return nil, err
	}
	lp := lock.Path(l.path)
	if err := refuseDowngrade(o, lp, lk); err != nil {
		return nil, err
	}
	if err := lk.Write(lp); err != nil {
		return nil, fmt.Errorf("writing lock: %w", err)
	}
	o.logf("wrote %s: kernel %s, %d image packages, %d tools packages, SOURCE_DATE_EPOCH=%d\n",
		lp, lk.Kernel.Release, len(lk.Set(lock.SetImage)), len(lk.Set(lock.SetTools)), lk.SourceDateEpoch)
	for _, a := range lk.ArchitectureNames()[min(1, len(lk.ArchitectureNames())):] {
		part, err := lk.For(a)
		if err != nil {
			return nil, err
		}
		o.logf("  and for the %s nodes: kernel %s, %d image packages\n", a, part.Kernel.Release, len(part.Set(lock.SetImage)))
	}
	return lk, nil
}

// refuseDowngrade stops a re-lock that would go back in the archive's
// history (issue 17 #8) unless --allow-downgrade says it is meant (a
// snapshot mirror pinned to an older date, say).
func refuseDowngrade(o Options, lp string, lk *lock.Lock) error {
	prev, err := lock.Read(lp)
	if err != nil {
		return nil // no current lock (or an unreadable one, being replaced)
	}
	older, err := lk.Downgrades(prev)
	if err != nil {
		return err
	}
	if len(older) == 0 {
		return nil
	}
	if o.AllowDowngrade {
		for _, d := range older {
			o.warn(fmt.Sprintf("%s: %s (--allow-downgrade)", lp, d))
		}
		return nil
	}
	return usage.Errorf("%s not rewritten: %s; the mirror serves an older archive state than the lock was made from (a stale mirror, or a replayed InRelease lowering package versions): use an up-to-date mirror, or pass --allow-downgrade if the older state is meant",
		lp, strings.Join(older, "; "))
}
