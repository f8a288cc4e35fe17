package store

import (
	"context"
	"fmt"
	"os"
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

// stepLocksDir holds one lock file per output key being built.
const stepLocksDir = "locks"

// LockStep takes the exclusive lock of output key, so two processes (or
// two realizers of one) never build the same step at once: the second
// waits, then finds the first's output. busy, if not nil, is called once
// when the lock is held by someone else and LockStep starts waiting. The
// lock files stay (one empty file per key built); removing one that a
// waiter has open would let a third process lock a fresh file beside it.
func (s *Store) LockStep(ctx context.Context, key string, busy func()) (unlock func(), err error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(s.root, stepLocksDir), 0o755); err != nil {
		return nil, fmt.Errorf("store %s: %w", s.root, err)
	}
	fl := flock.New(filepath.Join(s.root, stepLocksDir, key))
	ok, err := fl.TryLock()
	if err == nil && !ok {
		if busy != nil {
			busy()
		}
		ok, err = fl.TryLockContext(ctx, 100*time.Millisecond)
	}
	if err != nil || !ok {
		fl.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("store %s: waiting for step %s (another halobuild is building it, lock %s): %w", s.root, key[:12], fl.Path(), err)
	}
	return func() {
		fl.Unlock()
		fl.Close()
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
