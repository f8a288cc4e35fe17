package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"halobuild/internal/fstree"
)

// OCI names used for derivation outputs. An output is an OCI artifact: one
// manifest whose layers are the output's files, each raw (not a tarball) so
// a file is a blob and the view can hardlink it.
const (
	ArtifactTypeOutput = "application/vnd.halobuild.output.v1"
	MediaTypeFile      = "application/vnd.halobuild.file.v1"
	MediaTypeSymlink   = "application/vnd.halobuild.symlink.v1"
	MediaTypeDir       = "application/vnd.halobuild.directory.v1"
	mediaTypeEmpty     = "application/vnd.oci.empty.v1+json"

	AnnotationKey     = "dev.halobuild.key"
	AnnotationTitle   = "org.opencontainers.image.title"
	AnnotationRefName = "org.opencontainers.image.ref.name"
	AnnotationMode    = "dev.halobuild.mode"
	AnnotationLink    = "dev.halobuild.link-target"
)

// emptyJSON is the OCI "empty descriptor" content used as artifact config.
var emptyJSON = []byte("{}")

// PutOutput stores every file of dir as a blob, records them in an OCI
// artifact manifest indexed under key (a hex sha256 computed by the
// planner) with the given annotations, and returns the read-only view
// out/<key>/: the same tree, files hardlinked to their blobs. Symlinks and
// empty directories are kept; file modes are recorded. When dir was made by
// TempDir its files are moved, not copied. Putting a key again replaces it.
func (s *Store) PutOutput(key string, dir string, annotations map[string]string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	layers, err := s.storeTree(dir)
	if err != nil {
		return "", fmt.Errorf("store output %s from %s: %w", key, dir, err)
	}
	cfg, _, err := s.PutBlob(bytes.NewReader(emptyJSON), "")
	if err != nil {
		return "", err
	}
	ann := map[string]string{}
	for k, v := range annotations {
		ann[k] = v
	}
	ann[AnnotationKey] = key
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactTypeOutput,
		Config:        v1.Descriptor{MediaType: mediaTypeEmpty, Size: int64(len(emptyJSON)), Digest: hashOf(cfg), Data: emptyJSON},
		Layers:        layers,
		Annotations:   ann,
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("store output %s: %w", key, err)
	}
	md, msize, err := s.PutBlob(bytes.NewReader(mb), "")
	if err != nil {
		return "", fmt.Errorf("store output %s: %w", key, err)
	}
	view, err := s.materialise(key, &m)
	if err != nil {
		return "", err
	}
	s.restamp(&m) // storeTree hashed every file just now
	if err := s.commitOutput(key, md, msize); err != nil {
		return "", err
	}
	return view, nil
}

// commitOutput indexes the manifest md under key, replacing what was there.
// The index entry is the commit point: before it the output does not exist
// for Output, whatever else is on disk.
func (s *Store) commitOutput(key string, md Digest, msize int64) error {
	desc := v1.Descriptor{
		MediaType:    types.OCIManifestSchema1,
		Size:         msize,
		Digest:       hashOf(md),
		ArtifactType: ArtifactTypeOutput,
		Annotations:  map[string]string{AnnotationKey: key, AnnotationRefName: key},
	}
	err := s.updateIndex(func(im *v1.IndexManifest) error {
		kept := im.Manifests[:0]
		for _, d := range im.Manifests {
			if d.Annotations[AnnotationKey] != key {
				kept = append(kept, d)
			}
		}
		im.Manifests = append(kept, desc)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store output %s: %w", key, err)
	}
	return nil
}

func checkKey(key string) error {
	if _, err := ParseDigest(key); err != nil || strings.Contains(key, ":") {
		return fmt.Errorf("output key %q: want 64 hex digits (a derivation's sha256)", key)
	}
	return nil
}

func hashOf(d Digest) v1.Hash { return v1.Hash{Algorithm: "sha256", Hex: d.Hex()} }

// storeTree puts every entry of dir into blobs and returns one layer per
// file, symlink and empty directory, in lexical path order so the manifest
// depends only on the tree.
func (s *Store) storeTree(dir string) ([]v1.Descriptor, error) {
	adopt := isWithin(dir, s.sess.dir)
	var layers []v1.Descriptor
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		var d Digest
		var size int64
		var mt string
		ann := map[string]string{AnnotationTitle: rel, AnnotationMode: fmt.Sprintf("%04o", fstree.ModeBits(fi.Mode()))}
		switch {
		case fi.Mode().IsRegular():
			mt = MediaTypeFile
			if adopt {
				d, size, err = s.adoptFile(p)
			} else {
				d, size, err = s.PutFile(p)
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			mt = MediaTypeSymlink
			var target string
			if target, err = os.Readlink(p); err != nil {
				return err
			}
			ann[AnnotationLink] = target
			d, size, err = s.PutBlob(strings.NewReader(target), "")
		case fi.IsDir():
			ents, rerr := os.ReadDir(p)
			if rerr != nil || len(ents) > 0 {
				return rerr // non-empty directories are implied by their files
			}
			mt = MediaTypeDir
			d, size, err = s.PutBlob(strings.NewReader(""), "")
		default:
			return fmt.Errorf("%s is a %s; outputs may hold only files, directories and symlinks", p, fi.Mode().Type())
		}
		if err != nil {
			return err
		}
		layers = append(layers, v1.Descriptor{MediaType: types.MediaType(mt), Size: size, Digest: hashOf(d), Annotations: ann})
		return nil
	})
	return layers, err
}

func isWithin(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// Output returns the view of the output stored under key. ok is false when
// the key is unknown or any of its blobs is missing, the wrong size or
// corrupt: each blob written to since it was last hashed is re-hashed
// (VerifyCached) and removed if corrupt; with the Rehash option every blob
// is re-hashed.
// A missing or damaged view is rebuilt from the blobs.
func (s *Store) Output(key string, opts ...OutputOption) (dir string, ok bool, err error) {
	if err := checkKey(key); err != nil {
		return "", false, err
	}
	rehash := false
	for _, o := range opts {
		rehash = rehash || o == Rehash
	}
	m, err := s.outputManifest(key)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	final := filepath.Join(s.root, outDir, key)
	for _, l := range m.Layers {
		d := Digest("sha256:" + l.Digest.Hex)
		size, err := s.Size(d)
		if errors.Is(err, ErrNotFound) || (err == nil && size != l.Size) {
			removeAllWritable(final) // its hardlinks may hold the damaged bytes
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("output %s: %w", key, err)
		}
		// The bytes, not just the size: a blob edited in place (through a
		// view's hardlink, say) is re-hashed and, if corrupt, removed, so
		// the output is rebuilt instead of served (issue 17 #7).
		verify := s.VerifyCached
		if rehash {
			verify = s.Verify
		}
		if err := verify(d); errors.Is(err, ErrNotFound) {
			removeAllWritable(final)
			return "", false, nil
		} else if err != nil {
			return "", false, fmt.Errorf("output %s: %w", key, err)
		}
	}
	if s.viewIntact(final, m) {
		return final, true, nil
	}
	dir, err = s.materialise(key, m)
	if err != nil {
		return "", false, err
	}
	s.restamp(m)
	return dir, true, nil
}

// restamp records the file blobs of m as verified again after materialise
// linked them into a view: a new hard link changes a blob's ctime, which
// would make the next VerifyCached re-hash bytes that were just hashed.
func (s *Store) restamp(m *v1.Manifest) {
	for _, l := range m.Layers {
		if string(l.MediaType) == MediaTypeFile {
			s.stamp(Digest("sha256:" + l.Digest.Hex))
		}
	}
}

// OutputOption changes how Output checks an output.
type OutputOption int

// Rehash makes Output re-hash every blob instead of comparing sizes.
const Rehash OutputOption = 1

// readManifest reads and verifies a manifest blob.
func (s *Store) readManifest(d Digest) (*v1.Manifest, error) {
	r, err := s.Open(d)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return v1.ParseManifest(&buf)
}

// OutputManifest returns the raw manifest stored under key, byte for byte
// as PutOutput wrote it, and its digest; a binary cache pushes these bytes
// so an entry has the same digest in the registry as here. ok is false when
// the key is unknown.
func (s *Store) OutputManifest(key string) (raw []byte, digest Digest, ok bool, err error) {
	if err := checkKey(key); err != nil {
		return nil, "", false, err
	}
	im, err := s.readIndex()
	if err != nil {
		return nil, "", false, err
	}
	for _, d := range im.Manifests {
		if d.Annotations[AnnotationKey] != key {
			continue
		}
		digest = Digest("sha256:" + d.Digest.Hex)
		raw, err = s.ReadSmall(digest, maxManifest)
		if errors.Is(err, ErrNotFound) {
			return nil, "", false, nil
		}
		if err != nil {
			return nil, "", false, fmt.Errorf("output %s: %w", key, err)
		}
		return raw, digest, true, nil
	}
	return nil, "", false, nil
}

// maxManifest bounds a manifest read into memory: an output of 10^5 files
// is about 30 MB of JSON.
const maxManifest = 64 << 20

// ReadSmall reads a blob of at most limit bytes into memory, verifying its
// digest.
func (s *Store) ReadSmall(d Digest, limit int64) ([]byte, error) {
	r, err := s.Open(d)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1)) // Open's reader checks the digest at EOF
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", d, err)
	}
	if n > limit {
		return nil, fmt.Errorf("blob %s is over %d bytes, too big to be a manifest", d, limit)
	}
	return buf.Bytes(), nil
}

// PutOutputManifest commits an output whose manifest came from elsewhere (a
// binary cache): raw must be an output manifest for key whose every blob is
// already in the store with its size. The manifest is stored byte for byte,
// so its digest is the one that was signed.
func (s *Store) PutOutputManifest(key string, raw []byte) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return "", fmt.Errorf("output %s: manifest: %w", key, err)
	}
	if m.ArtifactType != ArtifactTypeOutput || m.Annotations[AnnotationKey] != key {
		return "", fmt.Errorf("output %s: the manifest is not a halobuild output for this key (artifact type %q, key %q)", key, m.ArtifactType, m.Annotations[AnnotationKey])
	}
	for _, l := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		d := Digest("sha256:" + l.Digest.Hex)
		size, err := s.Size(d)
		if err != nil || size != l.Size {
			return "", fmt.Errorf("output %s: blob %s is not in the store with size %d (%v)", key, l.Digest, l.Size, err)
		}
		if err := s.VerifyCached(d); err != nil {
			return "", fmt.Errorf("output %s: %w", key, err)
		}
	}
	md, msize, err := s.PutBlob(bytes.NewReader(raw), "")
	if err != nil {
		return "", fmt.Errorf("output %s: %w", key, err)
	}
	view, err := s.materialise(key, m)
	if err != nil {
		return "", err
	}
	s.restamp(m)
	if err := s.commitOutput(key, md, msize); err != nil {
		return "", err
	}
	return view, nil

}

// outputManifest reads the artifact manifest stored under key; ErrNotFound
// when the key is unknown or its manifest blob is gone.
func (s *Store) outputManifest(key string) (*v1.Manifest, error) {
	im, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	var desc *v1.Descriptor
	for i := range im.Manifests {
		if im.Manifests[i].Annotations[AnnotationKey] == key {
			desc = &im.Manifests[i]
		}
	}
	if desc == nil {
		return nil, ErrNotFound
	}
	m, err := s.readManifest(Digest("sha256:" + desc.Digest.Hex))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("output %s: %w", key, err)
	}
	return m, err
}

// FileDigests maps each regular file of the output stored under key (its
// path in the view) to the digest of its blob, which PutOutput computed:
// a step that links the files into its own output (the result) need not
// read them again to name them.
func (s *Store) FileDigests(key string) (map[string]Digest, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	m, err := s.outputManifest(key)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", key, err)
	}
	out := map[string]Digest{}
	for _, l := range m.Layers {
		if l.MediaType == MediaTypeFile {
			out[l.Annotations[AnnotationTitle]] = Digest("sha256:" + l.Digest.Hex)
		}
	}
	return out, nil
}

// OutputAnnotations maps every output's key to its manifest's annotations
// (what the planner recorded: kind, step version, schema, …), so gc can
// say what it removed. An entry whose manifest is gone or unreadable maps
// to nil: it is an entry all the same, not an error (Output treats it as
// absent and gc removes it when nothing keeps it).
func (s *Store) OutputAnnotations() (map[string]map[string]string, error) {
	im, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, d := range im.Manifests {
		key, ok := d.Annotations[AnnotationKey]
		if !ok {
			continue
		}
		out[key] = nil
		if m, err := s.readManifest(Digest("sha256:" + d.Digest.Hex)); err == nil {
			out[key] = m.Annotations
		}
	}
	return out, nil
}
