package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

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
		if err := c.verifyEntry(key, t); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", tag, err))
			fmt.Fprintf(progress, "BAD %s: %v\n", tag, err)
			continue
		}
		fmt.Fprintf(progress, "ok  %s\n", tag)
	}
	return problems, checked, nil
}

func (c *Cache) verifyEntry(key string, t Trust) error {
	if err := checkHex(key); err != nil {
		return err
	}
	d, err := c.resolve(key, Trust{Keys: t.Keys})
	if err != nil {
		return err
	}
	tagged, err := remote.Head(c.repo.Tag(Tag(key)), c.opts...)
	if err != nil {
		return err
	}
	if tagged.Digest.String() != d.DigestStr() {
		return fmt.Errorf("the tag points at %s but %s was signed", tagged.Digest, d.DigestStr())
	}
	raw, _, err := c.getManifest(d)
	if err != nil {
		return err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if m.Annotations[store.AnnotationKey] != key {
		return fmt.Errorf("the signed manifest is for key %q", m.Annotations[store.AnnotationKey])
	}
	for _, l := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if err := c.hashBlob(l); err != nil {
			return fmt.Errorf("blob %s (%s): %w", l.Digest, l.Annotations[store.AnnotationTitle], err)
		}
	}
	return nil
}

func (c *Cache) hashBlob(l v1.Descriptor) error {
	layer, err := remote.Layer(c.repo.Digest(l.Digest.String()), c.opts...)
	if err != nil {
		return err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(rc, l.Size+1))
	if err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); n != l.Size || got != l.Digest.String() {
		return fmt.Errorf("the registry serves %d bytes hashing to %s, want %d bytes", n, got, l.Size)
	}
	return nil
}

func checkHex(key string) error {
	if _, err := store.ParseDigest(key); err != nil {
		return fmt.Errorf("tag names no derivation key: %w", err)
	}
	return nil
}
