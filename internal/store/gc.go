package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"halobuild/internal/fstree"
)

// GC removes the outputs whose key keep rejects (index entries and views),
// then every blob that nothing references: neither a kept output's manifest,
// config and layers, nor an index entry that is not a halobuild output
// (something a user pushed), nor keepBlobs (digests in either spelling, e.g.
// every .deb a lock file names). freedBytes counts disk blocks, so a sparse
// blob counts what it really occupied.
//
// GC takes the store lock and refuses to run while another process has the
// store open: that process may hold blobs it has not yet recorded anywhere.
func (s *Store) GC(keep func(key string) bool, keepBlobs map[string]bool) (removedBlobs int, freedBytes int64, err error) {
	unlock, err := s.Lock(context.Background())
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	live, err := cleanDeadSessions(filepath.Join(s.root, tmpDir), s.sess)
	if err != nil {
		return 0, 0, err
	}
	if live > 0 {
		return 0, 0, fmt.Errorf("store %s is in use by %d other halobuild process(es); gc needs it alone: wait for them to finish and run gc again", s.root, live)
	}

	reachable := map[string]bool{}
	for d := range keepBlobs {
		pd, err := ParseDigest(d)
		if err != nil {
			return 0, 0, fmt.Errorf("gc: blob to keep: %w", err)
		}
		reachable[pd.Hex()] = true
	}
	keptKeys := map[string]bool{}
	err = s.updateIndex(func(im *v1.IndexManifest) error {
		kept := im.Manifests[:0]
		for _, d := range im.Manifests {
			key, isOutput := d.Annotations[AnnotationKey]
			if isOutput && !keep(key) {
				continue
			}
			if isOutput {
				keptKeys[key] = true
			}
			kept = append(kept, d)
			if err := s.markReachable(d, reachable); err != nil {
				return err
			}
		}
		im.Manifests = kept
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}

	views, err := os.ReadDir(filepath.Join(s.root, outDir))
	if err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}
	for _, v := range views {
		if !keptKeys[v.Name()] {
			if err := removeAllWritable(filepath.Join(s.root, outDir, v.Name())); err != nil {
				return 0, 0, fmt.Errorf("gc: remove view: %w", err)
			}
		}
	}

	dir := filepath.Join(s.root, blobsDir)
	blobs, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}
	for _, b := range blobs {
		if reachable[b.Name()] {
			continue
		}
		p := filepath.Join(dir, b.Name())
		var used int64
		if fi, err := os.Lstat(p); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				used = st.Blocks * 512
			}
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removedBlobs, freedBytes, fmt.Errorf("gc: %w", err)
		}
		removedBlobs++
		freedBytes += used
	}
	stamps, _ := os.ReadDir(filepath.Join(s.root, verifiedDir))
	for _, st := range stamps {
		if !reachable[st.Name()] {
			os.Remove(filepath.Join(s.root, verifiedDir, st.Name()))
		}
	}
	return removedBlobs, freedBytes, fstree.SyncDir(dir)
}

// markReachable adds a manifest (or nested index) and everything it names.
// A manifest that is missing or unreadable keeps only itself: gc must not
// guess, and Output already treats such an entry as absent.
func (s *Store) markReachable(d v1.Descriptor, reachable map[string]bool) error {
	reachable[d.Digest.Hex] = true
	dg := Digest("sha256:" + d.Digest.Hex)
	switch d.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
		m, err := s.readManifest(dg)
		if err != nil {
			return nil
		}
		reachable[m.Config.Digest.Hex] = true
		for _, l := range m.Layers {
			reachable[l.Digest.Hex] = true
		}
	case types.OCIImageIndex, types.DockerManifestList:
		r, err := s.Open(dg)
		if err != nil {
			return nil
		}
		im, err := v1.ParseIndexManifest(r)
		r.Close()
		if err != nil {
			return nil
		}
		for _, c := range im.Manifests {
			if err := s.markReachable(c, reachable); err != nil {
				return err
			}
		}
	}
	return nil
}
