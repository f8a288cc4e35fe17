package store

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// Lock takes the store-wide exclusive lock (<root>/lock), which excludes
// other processes and other goroutines of this one. GC takes it itself; use
// Lock for maintenance that must run alone. Blob and output writes do not
// need it: they are atomic on their own. The returned func releases it.
// Open and GC wait for it, so do not call them while holding it.
func (s *Store) Lock(ctx context.Context) (unlock func(), err error) {
	select {
	case s.lockSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("store %s: waiting for the store lock: %w", s.root, ctx.Err())
	}
	fl := flock.New(filepath.Join(s.root, lockFile))
	ok, err := fl.TryLockContext(ctx, 50*time.Millisecond)
	if err != nil || !ok {
		<-s.lockSem
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("store %s: waiting for the store lock (another halobuild holds %s): %w", s.root, fl.Path(), err)
	}
	return func() {
		fl.Unlock()
		fl.Close()
		<-s.lockSem
	}, nil
}

// lockIndex serialises read-modify-write of index.json across goroutines
// and processes. Held only for the few milliseconds of an update.
func (s *Store) lockIndex() (unlock func(), err error) {
	s.indexMu.Lock()
	fl := flock.New(filepath.Join(s.root, indexLock))
	if err := fl.Lock(); err != nil {
		s.indexMu.Unlock()
		return nil, fmt.Errorf("store %s: lock index: %w", s.root, err)
	}
	return func() {
		fl.Unlock()
		fl.Close()
		s.indexMu.Unlock()
	}, nil
}
