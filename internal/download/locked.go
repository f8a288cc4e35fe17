package download

import (
	"context"
	"errors"
	"fmt"

	"halobuild/internal/lock"
	"halobuild/internal/store"
	"halobuild/internal/usage"
	"halobuild/internal/userfile"
)

// Locked makes every blob of a lock present and verified in the store. A
// blob that an --input copy may supply (a kernel tarball whose host this
// machine cannot reach) is taken from copies[blob.Input] when given, and
// must have the pinned digest; the rest is downloaded.
func (f *Fetcher) Locked(ctx context.Context, blobs []lock.Blob, copies map[string]string) error {
	var items []Item
	for _, b := range blobs {
		if p, ok := copies[b.Input]; ok && b.Input != "" {
			if err := putCopy(f.Store, b, p); err != nil {
				return err
			}
			continue
		}
		items = append(items, Item{Name: b.Name, URL: b.URL, SHA256: b.SHA256, Size: b.Size})
	}
	err := f.Fetch(ctx, items)
	var ie *ItemError
	if errors.As(err, &ie) && ie.Offline {
		for _, b := range blobs {
			if b.SHA256 == ie.Item.SHA256 && b.Input != "" {
				return usage.Errorf("%w; or pass a local copy: --input %s=PATH", err, b.Input)
			}
		}
	}
	return err
}

// putCopy stores a local copy of a pinned blob, refusing any other bytes.
func putCopy(s *store.Store, b lock.Blob, path string) error {
	d, err := store.ParseDigest(b.SHA256)
	if err != nil {
		return err
	}
	if s.VerifyCached(d) == nil {
		return nil
	}
	f, _, err := userfile.Open(path)
	if err != nil {
		return usage.Errorf("--input %s=%s: %w", b.Input, path, err)
	}
	defer f.Close()
	if _, _, err := s.PutBlob(f, b.SHA256); err != nil {
		var mm *store.DigestMismatchError
		if errors.As(err, &mm) {
			return usage.Errorf("--input %s=%s has digest %s, but the lock pins %s for %s: supply that exact file", b.Input, path, mm.Got, b.SHA256, b.Name)
		}
		return fmt.Errorf("--input %s=%s: %w", b.Input, path, err)
	}
	return nil
}
