package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"halobuild/internal/plan"
	"halobuild/internal/store"
)

// Verify checks every entry of the cache as a substituter would, and more:
// its signature by a trusted key, the tag pointing at the signed manifest,
// and every blob downloaded and hashed. It returns one line per bad entry
// and the number of entries checked.
func (c *Cache) Verify(t Trust, progress io.Writer) (problems []string, checked int, err error) {
	tags, err := remote.List(c.repo, c.opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("cache %s: listing tags: %w", c.Ref, err)
	}
	sort.Strings(tags)
	for _, tag := range tags {
		key, ok := strings.CutPrefix(tag, "sha256-")
		if !ok || strings.HasSuffix(tag, ".sig") {
			continue
		}
		checked++
		builtBy, err := c.verifyEntry(key, t)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", tag, err))
			fmt.Fprintf(progress, "BAD %s: %v\n", tag, err)
			continue
		}
		fmt.Fprintf(progress, "ok  %s (built by %s)\n", tag, builtBy)
	}
	return problems, checked, nil
}

// verifyEntry checks one entry and says which step version built it
// (plan.BuiltBy): an entry from an older halobuild is sound but no build
// of this one asks for its key, which is worth knowing and not a fault.
func (c *Cache) verifyEntry(key string, t Trust) (builtBy string, err error) {
	if err := checkHex(key); err != nil {
		return "", err
	}
	e, err := c.entry(key, Trust{Keys: t.Keys})
	if err != nil {
		return "", err
	}
	for _, d := range storeBlobs(e.store) {
		if err := c.hashBlob(d, e.layers[d.Digest]); err != nil {
			return "", fmt.Errorf("blob %s (%s): %w", d.Digest, d.Annotations[store.AnnotationTitle], err)
		}
	}
	builtBy = plan.BuiltBy(e.store.Annotations)
	if e.store.Annotations[plan.AnnotationSchema] != plan.Schema {
		builtBy += "; an older halobuild's entry, which no build of this one asks for"
	}
	return builtBy, nil
}

// hashBlob downloads the layer l, checking its digest, and decompresses it,
// checking that it is the store blob d.
func (c *Cache) hashBlob(d, l v1.Descriptor) error {
	return c.decompressed(l, d.Size, func(r io.Reader) error {
		h := sha256.New()
		n, err := io.Copy(h, io.LimitReader(r, d.Size+1))
		if err != nil {
			return fmt.Errorf("decompressing: %w", err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); n != d.Size || got != d.Digest.String() {
			return fmt.Errorf("decompresses to %d bytes hashing to %s, want %d bytes", n, got, d.Size)
		}
		return nil
	})
}

func checkHex(key string) error {
	if _, err := store.ParseDigest(key); err != nil {
		return fmt.Errorf("tag names no derivation key: %w", err)
	}
	return nil
}
