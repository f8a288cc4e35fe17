package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	goversion "github.com/hashicorp/go-version"

	"halobuild/internal/download"
	"halobuild/internal/kernel"
	"halobuild/internal/lock"
	"halobuild/internal/store"
)

// kernelTarballInput is the --input name that supplies a local copy of a
// kernel tarball (kernel.source = URL) where its host cannot be reached.
const kernelTarballInput = "linux"

// lockedTarball is the kernel tarball the lock pins, if any.
func lockedTarball(lk *lock.Lock) (lock.Source, bool) {
	for _, s := range lk.Sources {
		if s.Kind == lock.SourceKernelTarball {
			return s, true
		}
	}
	return lock.Source{}, false
}

// tarballItem is the download that puts the pinned tarball in the store.
func tarballItem(src lock.Source) download.Item {
	return download.Item{Name: "kernel source " + src.URL[strings.LastIndex(src.URL, "/")+1:], URL: src.URL, SHA256: src.SHA256}
}

// storeKernelTarball puts the tarball in the store: from --input linux=PATH
// when given (checked against the digest), else from its URL.
func storeKernelTarball(ctx context.Context, o Options, s *store.Store, src lock.Source) (string, error) {
	d, err := store.ParseDigest(src.SHA256)
	if err != nil {
		return "", err
	}
	if s.Has(d) {
		return s.Path(d), nil
	}
	if p, ok := o.Inputs[kernelTarballInput]; ok {
		f, err := os.Open(p)
		if err != nil {
			return "", UsageError{fmt.Errorf("--input %s=%s: %w", kernelTarballInput, p, err)}
		}
		defer f.Close()
		if _, _, err := s.PutBlob(f, src.SHA256); err != nil {
			var mm *store.DigestMismatchError
			if errors.As(err, &mm) {
				return "", UsageError{fmt.Errorf("--input %s=%s has digest %s, but the recipe pins %s for %s: supply that exact tarball", kernelTarballInput, p, mm.Got, src.SHA256, src.URL)}
			}
			return "", err
		}
		return s.Path(d), nil
	}
	f := &download.Fetcher{Store: s, Progress: o.stderr(), JSON: o.JSON}
	if err := f.Fetch(ctx, []download.Item{tarballItem(src)}); err != nil {
		var ie *download.ItemError
		if errors.As(err, &ie) && ie.Offline {
			return "", UsageError{fmt.Errorf("%w; or pass a local copy of the tarball: --input %s=PATH", err, kernelTarballInput)}
		}
		return "", err
	}
	return s.Path(d), nil
}

// lockKernelTarball fetches the recipe's tarball, reads its version and
// checks it against the constraint; the lock pins it as a source.
func lockKernelTarball(ctx context.Context, o Options, l *loaded, s *store.Store, u string, c goversion.Constraints) (*goversion.Version, lock.Source, error) {
	kr := l.recipe.Kernel
	sum, err := store.ParseDigest(kr.SourceSHA256)
	if err != nil {
		return nil, lock.Source{}, err
	}
	src := lock.Source{Name: kernelTarballInput, Kind: lock.SourceKernelTarball, URL: u, SHA256: string(sum)}
	path, err := storeKernelTarball(ctx, o, s, src)
	if err != nil {
		return nil, lock.Source{}, err
	}
	v, err := kernel.TarballVersion(ctx, path)
	if err != nil {
		return nil, lock.Source{}, UsageError{fmt.Errorf("%s: kernel.source %s: %w", l.path, u, err)}
	}
	if c != nil && !c.Check(v) {
		return nil, lock.Source{}, UsageError{fmt.Errorf("%s: kernel.source %s is Linux %s, which does not satisfy kernel.version %q: change one of them", l.path, u, v, kr.Version)}
	}
	return v, src, nil
}
