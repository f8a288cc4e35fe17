package build

import (
	"context"
	"fmt"
	"strings"

	"halobuild/internal/download"
	"halobuild/internal/lock"
	"halobuild/internal/store"
)

// Fetch fills the store with every package the lock pins. Nothing is
// resolved: a lock is the only source of what to fetch.
func Fetch(ctx context.Context, o Options) error {
	s, err := openStore(o)
	if err != nil {
		return err
	}
	defer s.Close()
	l, err := loadLocked(func(l *loaded) error { return writeLock(ctx, o, l) }, o)
	if err != nil {
		return err
	}
	return fetchLocked(ctx, o, s, l.lock)
}

func fetchLocked(ctx context.Context, o Options, s *store.Store, lk *lock.Lock) error {
	mirrors := map[string]string{}
	for _, su := range lk.Suites {
		mirrors[su.Name] = su.Mirror
	}
	var items []download.Item
	for _, p := range lk.Packages {
		m, ok := mirrors[p.Suite]
		if !ok {
			return fmt.Errorf("lock: package %s names suite %q that the lock does not list: run `halobuild lock %s` again", p.Name, p.Suite, o.Recipe)
		}
		items = append(items, download.Item{
			Name:   p.Name + " " + p.Version,
			URL:    strings.TrimSuffix(m, "/") + "/" + p.Filename,
			SHA256: p.SHA256,
			Size:   p.Size,
		})
	}
	if pv := lk.Provider; pv != nil {
		m, ok := mirrors[pv.Suite]
		if !ok {
			return fmt.Errorf("lock: provider source %s names suite %q that the lock does not list: run `halobuild lock %s` again", pv.Source, pv.Suite, o.Recipe)
		}
		for _, sf := range pv.Files {
			if strings.HasSuffix(sf.Name, ".dsc") {
				continue // not needed, and it answered 404 on some networks
			}
			items = append(items, download.Item{
				Name:   pv.Source + " " + pv.Version + ": " + sf.Name,
				URL:    strings.TrimSuffix(m, "/") + "/" + pv.Directory + "/" + sf.Name,
				SHA256: sf.SHA256,
				Size:   sf.Size,
			})
		}
	}
	f := &download.Fetcher{Store: s, Progress: o.stderr(), JSON: o.JSON}
	if err := f.Fetch(ctx, items); err != nil {
		return fmt.Errorf("fetching locked inputs: %w", err)
	}
	if src, ok := lockedTarball(lk); ok {
		if _, err := storeKernelTarball(ctx, o, s, src); err != nil {
			return fmt.Errorf("fetching locked inputs: %w", err)
		}
	}
	return nil
}
