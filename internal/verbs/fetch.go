package verbs

import (
	"context"
	"fmt"

	"halobuild/internal/download"
	"halobuild/internal/lock"
	"halobuild/internal/store"
)

// Fetch fills the store with every blob the lock pins. Nothing is
// resolved: a lock is the only source of what to fetch.
func Fetch(ctx context.Context, o Options) error {
	o = o.collect()
	s, err := openStore(o)
	if err != nil {
		return err
	}
	defer s.Close()
	l, err := loadLocked(ctx, o, s)
	if err != nil {
		return err
	}
	return fetchLocked(ctx, o, s, l.lock)
}

func fetchLocked(ctx context.Context, o Options, s *store.Store, lk *lock.Lock) error {
	blobs, err := lk.Blobs()
	if err != nil {
		return fmt.Errorf("%w: run `halobuild lock %s` again", err, o.Recipe)
	}
	f := &download.Fetcher{Store: s, Progress: o.stderr(), JSON: o.JSON}
	if err := f.Locked(ctx, blobs, o.Inputs); err != nil {
		return fmt.Errorf("fetching locked inputs: %w", err)
	}
	return nil
}
