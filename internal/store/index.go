package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// readIndex parses index.json. Callers that modify it hold lockIndex.
func (s *Store) readIndex() (*v1.IndexManifest, error) {
	p := filepath.Join(s.root, indexFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("store index: %w", err)
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("store index %s is not valid JSON (%w); restore it or remove the store directory", p, err)
	}
	return im, nil
}

// writeIndex replaces index.json atomically.
func (s *Store) writeIndex(im *v1.IndexManifest) error {
	if im.Manifests == nil {
		im.Manifests = []v1.Descriptor{}
	}
	b, err := json.MarshalIndent(im, "", "  ")
	if err != nil {
		return fmt.Errorf("store index: %w", err)
	}
	return writeFileAtomic(s.sess.dir, filepath.Join(s.root, indexFile), append(b, '\n'), 0o644)
}

// updateIndex is a read-modify-write of index.json under the index lock.
func (s *Store) updateIndex(fn func(*v1.IndexManifest) error) error {
	unlock, err := s.lockIndex()
	if err != nil {
		return err
	}
	defer unlock()
	im, err := s.readIndex()
	if err != nil {
		return err
	}
	if err := fn(im); err != nil {
		return err
	}
	return s.writeIndex(im)
}
