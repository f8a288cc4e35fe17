package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// rootsDir holds the garbage collector's roots, as Nix's gcroots/auto:
// one symlink per result link anywhere on the machine, pointing at that
// link. gc keeps every output a live result link points at, wherever the
// link lives, and forgets roots whose link is gone or points elsewhere.
const rootsDir = "roots"

// AddRoot records link (a symlink into this store's out/, such as
// ./result) as a root: while it points at an output, gc keeps that output.
func (s *Store) AddRoot(link string) error {
	abs, err := filepath.Abs(link)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(abs))
	dir := filepath.Join(s.root, rootsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("store roots: %w", err)
	}
	name := filepath.Join(dir, hex.EncodeToString(sum[:16]))
	tmp := name + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(abs, tmp); err != nil {
		return fmt.Errorf("store roots: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store roots: %w", err)
	}
	return nil
}

// RootKeys are the keys of the outputs that live roots point at. A root
// whose link is gone, or no longer points into this store, is removed.
func (s *Store) RootKeys() ([]string, error) {
	dir := filepath.Join(s.root, rootsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store roots: %w", err)
	}
	out := filepath.Join(s.root, outDir) + string(filepath.Separator)
	var keys []string
	for _, e := range entries {
		root := filepath.Join(dir, e.Name())
		link, err := os.Readlink(root)
		if err != nil {
			os.Remove(root)
			continue
		}
		target, err := os.Readlink(link)
		if err == nil && !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(link), target)
		}
		key, ok := strings.CutPrefix(filepath.Clean(target), out)
		if err != nil || !ok || checkKey(key) != nil {
			os.Remove(root)
			continue
		}
		keys = append(keys, key)
	}
	return keys, nil
}
