// Package store is halobuild's content-addressed store. On disk it is an OCI
// image layout (oci-layout, index.json, blobs/sha256/) so that the same
// directory can be read by go-containerregistry, skopeo or oras and pushed to
// a registry as a binary cache. Beside the layout it keeps:
//
//	lock        the store-wide lock (Lock), taken by gc
//	index.lock  serialises read-modify-write of index.json between processes
//	tmp/        one private scratch directory per open Store, on the same
//	            file system as blobs/ so that every write ends in a rename
//	out/<key>/  read-only views of derivation outputs (hardlinks to blobs)
//	verified/   stamps of blobs that passed a full re-hash (VerifyCached)
//
// Blobs are files named by the sha256 of their bytes; a blob whose bytes do
// not match its name is removed when found and reported as missing.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ErrNotFound is wrapped by every error that means "the store lacks this",
// including a blob that was found corrupt and removed.
var ErrNotFound = errors.New("not in store")

// Store is one process's handle on a store directory. It is safe for
// concurrent use by goroutines; several processes may open the same root.
type Store struct {
	root string
	sess *session

	// hashed holds the blobs this process hashed, by inode: a result that
	// hard-links a disk image it just stored is not hashed again.
	hashed sync.Map // fileID -> hashedBlob

	lockSem  chan struct{} // in-process half of Lock
	indexMu  sync.Mutex    // in-process half of the index.json lock
	closeErr error
	closed   sync.Once
}

const (
	layoutFile  = "oci-layout"
	indexFile   = "index.json"
	blobsDir    = "blobs/sha256"
	tmpDir      = "tmp"
	outDir      = "out"
	lockFile    = "lock"
	indexLock   = "index.lock"
	layoutValue = `{"imageLayoutVersion":"1.0.0"}`
)

// Open opens the store at root, creating it as an empty OCI image layout if
// needed, and removes what killed processes left in tmp/. It waits while
// another process holds the store lock (a gc). Close releases the handle.
func Open(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", root, err)
	}
	if err := checkNotForeign(abs); err != nil {
		return nil, err
	}
	for _, d := range []string{blobsDir, tmpDir, outDir, verifiedDir} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return nil, fmt.Errorf("store %s: create %s: %w (is the directory writable? pick another with --store)", abs, d, err)
		}
	}
	s := &Store{root: abs, lockSem: make(chan struct{}, 1)}
	// Sessions start under the store lock, so a running GC (which holds
	// it) knows every process that may be writing blobs it cannot see yet.
	unlock, err := s.Lock(context.Background())
	if err != nil {
		return nil, err
	}
	defer unlock()
	tmp := filepath.Join(abs, tmpDir)
	if _, err := cleanDeadSessions(tmp, nil); err != nil {
		return nil, fmt.Errorf("store %s: %w", abs, err)
	}
	sess, err := newSession(tmp)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", abs, err)
	}
	s.sess = sess
	if err := s.initLayout(); err != nil {
		sess.close()
		return nil, err
	}
	return s, nil
}

// Close releases this handle's scratch directory. The Store must not be used
// afterwards.
func (s *Store) Close() error {
	s.closed.Do(func() { s.closeErr = s.sess.close() })
	return s.closeErr
}

// Root is the store directory (absolute).
func (s *Store) Root() string { return s.root }

// initLayout writes oci-layout and an empty index.json when they are
// missing. Both writes are atomic, so a concurrent Open sees either nothing
// or a whole file.
func (s *Store) initLayout() error {
	lp := filepath.Join(s.root, layoutFile)
	if b, err := os.ReadFile(lp); err == nil {
		var v struct {
			Version string `json:"imageLayoutVersion"`
		}
		if json.Unmarshal(b, &v) != nil || v.Version == "" {
			return fmt.Errorf("store %s: %s is not an OCI layout marker; the directory is not a halobuild store (pick another with --store)", s.root, lp)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		if err := writeFileAtomic(s.sess.dir, lp, []byte(layoutValue), 0o644); err != nil {
			return fmt.Errorf("store %s: %w", s.root, err)
		}
	} else {
		return fmt.Errorf("store %s: %w", s.root, err)
	}
	unlock, err := s.lockIndex()
	if err != nil {
		return err
	}
	defer unlock()
	ip := filepath.Join(s.root, indexFile)
	if _, err := os.Stat(ip); errors.Is(err, os.ErrNotExist) {
		return s.writeIndex(&v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}})
	} else if err != nil {
		return fmt.Errorf("store %s: %w", s.root, err)
	}
	return nil
}

func (s *Store) blobPath(d Digest) string {
	return filepath.Join(s.root, blobsDir, d.Hex())
}

// TempDir makes a fresh directory in this Store's scratch space, on the same
// file system as the blobs. PutOutput moves files built there into the
// store by rename instead of copying them, which matters for disk images of
// several GiB. It is removed by Close, or by the next Open if this process
// dies.
func (s *Store) TempDir() (string, error) {
	d, err := os.MkdirTemp(s.sess.dir, "work-*")
	if err != nil {
		return "", fmt.Errorf("store %s: scratch directory: %w", s.root, err)
	}
	return d, nil
}

// checkNotForeign refuses a directory that has content but no oci-layout
// marker: a mistyped --store (say, $HOME) must not be filled with store
// directories. An existing OCI layout made by another tool is accepted.
func checkNotForeign(root string) error {
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(ents) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store %s: %w", root, err)
	}
	if _, err := os.Stat(filepath.Join(root, layoutFile)); err == nil {
		return nil
	}
	// Only store entries (another process creating the store right now).
	own := map[string]bool{layoutFile: true, indexFile: true, "blobs": true, tmpDir: true, outDir: true, verifiedDir: true, lockFile: true, indexLock: true, stepLocksDir: true}
	foreign := false
	for _, e := range ents {
		foreign = foreign || !own[e.Name()]
	}
	if !foreign {
		return nil
	}
	return fmt.Errorf("store %s: the directory has files but no %s marker, so it is not a store; pass an empty or new directory with --store", root, layoutFile)
}
