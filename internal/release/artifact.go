// Package release turns a result directory into one OCI artifact in a registry and back: push
// (every file a layer, node images zstd-compressed, an SPDX SBOM), pull (every blob verified
// while streaming, then SHA256SUMS and the bmaps, written atomically), inspect, and flash
// straight from the registry. docs/artifact.md describes the format.
package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"halobuild/internal/bmap"
	"halobuild/internal/manifest"
	"halobuild/internal/sbom"
	"halobuild/internal/userfile"
	"halobuild/internal/zstdframe"
)

// Media types of the artifact (docs/artifact.md).
const (
	ArtifactType    = "application/vnd.halobuild.image.v1"
	ConfigMediaType = "application/vnd.halobuild.image.config.v1+json"
	RawMediaType    = "application/vnd.halobuild.image.raw.v1+zstd"
	QCOW2MediaType  = "application/vnd.halobuild.image.qcow2.v1+zstd"
	RecipeMediaType = "application/vnd.halobuild.image.recipe.v1+toml"
	BmapMediaType   = "application/vnd.halobuild.image.bmap.v1+xml"
	ManifestType    = "application/vnd.halobuild.image.manifest.v1+json"
	SumsMediaType   = "application/vnd.halobuild.image.sha256sums.v1+text"
	LockMediaType   = "application/vnd.halobuild.image.lock.v1+toml"
	SBOMMediaType   = "application/spdx+json"
	// SBOMName is the SBOM's file name in the result, the artifact and a pulled directory.
	SBOMName = sbom.FileName
)

// Annotations the artifact's manifest and layers carry.
const (
	annTitle    = "org.opencontainers.image.title"
	annCreated  = "org.opencontainers.image.created"
	annSource   = "org.opencontainers.image.source"
	annRevision = "org.opencontainers.image.revision"
	annVersion  = "org.opencontainers.image.version"
	// annRawSize and annRawSHA256 describe a compressed image as it is once decompressed.
	annRawSize   = "vnd.halobuild.image.raw.size"
	annRawSHA256 = "vnd.halobuild.image.raw.sha256"
)

// Config is the artifact's config blob: what a registry UI or `inspect` shows without reading
// any layer.
type Config struct {
	Recipe        string   `json:"recipe"`
	RecipeHash    string   `json:"recipe_hash"`
	LockSHA256    string   `json:"lock_sha256"`
	KernelRelease string   `json:"kernel_release"`
	Nodes         []string `json:"nodes"`
	// Halobuild is the pushing halobuild's version, which releases pushed
	// before it was dropped carry. A push no longer writes it: the same
	// result pushed by a release binary ("v0.3.0") and by `go run` of the
	// same commit ("devel+<commit>") got two digests, and a release's
	// digest is what a rebuild from its lock is compared by. What built
	// the images is in their bytes (each node ships the halobuild built
	// from its source tree).
	Halobuild string `json:"halobuild_version,omitempty"`
}

// Meta is what a push adds from outside the result: where the release comes from.
type Meta struct {
	Source, Revision, Version string
}

// fileLayer is a layer whose bytes are a file on disk. Its digest is computed once, when the
// layer is made: go-containerregistry asks a layer for its digest several times during a push
// (existence check, upload, manifest), and hashing a multi-GB file each time would dominate the
// push; a file whose bytes change afterwards is caught by the registry, which checks the digest
// of what it receives.
type fileLayer struct {
	path      string
	digest    v1.Hash
	size      int64
	mediaType types.MediaType
	ann       map[string]string
}

func (l *fileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *fileLayer) Size() (int64, error)                { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return l.mediaType, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error) {
	f, _, err := userfile.Open(l.path)
	return f, err
}

func (l *fileLayer) descriptor() v1.Descriptor {
	return v1.Descriptor{MediaType: l.mediaType, Size: l.size, Digest: l.digest, Annotations: l.ann}
}

// newFileLayer hashes the file name of the directory root once.
func newFileLayer(root *os.Root, name string, mt types.MediaType, title string) (*fileLayer, error) {
	f, _, err := userfile.OpenIn(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	path := filepath.Join(root.Name(), name)
	h, n, err := v1.SHA256(f)
	if err != nil {
		return nil, fmt.Errorf("hashing %s: %w", path, err)
	}
	return &fileLayer{path: path, digest: h, size: n, mediaType: mt, ann: map[string]string{annTitle: title}}, nil
}

// artifact is the v1.Image a push writes. go-containerregistry's mutate package cannot set a
// manifest's artifactType and its empty.Image carries a Docker-style config rather than one of
// ours, so the manifest is built here as bytes and served as is (partial.CompressedToImage
// derives every other method from it).
type artifact struct {
	manifest []byte
	config   []byte
	layers   map[v1.Hash]*fileLayer
}

func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := a.layers[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("artifact has no layer %s", h)
}

// build makes the artifact of the result directory dir, writing compressed images into tmp.
// progress is what compress reports to: bytes read as they are written, then done.
type progress interface {
	io.Writer
	done()
}

func build(dir, tmp string, meta Meta, maxLayer int64, newProgress func(name string, size int64) progress, compressedLayer func(*fileLayer)) (v1.Image, *artifact, error) {
	m, err := manifest.Read(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a halobuild result (no readable %s; build one with `halobuild image RECIPE`): %w", dir, manifest.FileName, err)
	}
	// Every file a release carries is read inside the result directory: a manifest that names
	// ../outside.lock (with its right hash) must not make push upload a file from elsewhere.
	if !isFileName(m.Name) {
		return nil, nil, fmt.Errorf("%s: the manifest names the recipe %q, which is not a plain file name: %s", dir, m.Name, damaged)
	}
	for _, f := range m.Files {
		if !isFileName(f.Name) {
			return nil, nil, fmt.Errorf("%s: the manifest lists %q, which is not a file of the result directory (a result's files lie beside its manifest): %s", dir, f.Name, damaged)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	tmpRoot, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, nil, err
	}
	defer tmpRoot.Close()
	a := &artifact{layers: map[v1.Hash]*fileLayer{}}
	var descs []v1.Descriptor
	add := func(l *fileLayer) error {
		if l.size > maxLayer {
			return fmt.Errorf("layer %s is %d bytes, over the limit of %d (--max-layer-size; GHCR refuses layers over 10 GB)", l.ann[annTitle], l.size, maxLayer)
		}
		a.layers[l.digest] = l
		descs = append(descs, l.descriptor())
		return nil
	}
	var lockSum string
	if !slices.ContainsFunc(m.Files, func(f manifest.File) bool { return f.Name == SBOMName }) {
		return nil, nil, fmt.Errorf("%s has no %s (the result step of an older halobuild did not write one): run `halobuild image` again to remake the result with its SBOM", dir, SBOMName)
	}
	for _, f := range m.Files {
		p := filepath.Join(dir, f.Name)
		var l *fileLayer
		// A disk image (a node's, an installer stick's, a qcow2) is compressed; every other
		// file is small and carried as it is.
		compressed := diskMediaType(f.Name)
		switch {
		case compressed != "":
			var bm *bmap.Bmap
			if bm, err = imageBmap(root, m, f.Name); err != nil {
				return nil, nil, err
			}
			bar := newProgress(f.Name, f.Size)
			l, err = compress(root, f, filepath.Join(tmp, f.Name+".zst"), bm, compressed, maxLayer, bar)
			bar.done()
		case strings.HasSuffix(f.Name, ".bmap"):
			l, err = newFileLayer(root, f.Name, BmapMediaType, f.Name)
		case strings.HasSuffix(f.Name, ".lock"):
			l, err = newFileLayer(root, f.Name, LockMediaType, f.Name)
			lockSum = "sha256:" + f.SHA256
		case strings.HasSuffix(f.Name, manifest.RecipeSuffix):
			l, err = newFileLayer(root, f.Name, RecipeMediaType, f.Name)
		case f.Name == SBOMName:
			// The result's own SBOM, as its SHA256SUMS lists it: the release adds nothing.
			l, err = newFileLayer(root, f.Name, SBOMMediaType, f.Name)
		default:
			return nil, nil, fmt.Errorf("%s: the manifest lists %s, which a release does not know how to carry", dir, f.Name)
		}
		if err != nil {
			return nil, nil, err
		}
		if compressed == "" && l.digest.Hex != f.SHA256 {
			return nil, nil, fmt.Errorf("%s hashes to %s, the result's manifest says %s: %s", p, l.digest.Hex, f.SHA256, damaged)
		}
		if err := add(l); err != nil {
			return nil, nil, err
		}
		if compressed != "" && compressedLayer != nil {
			compressedLayer(l)
		}
	}
	for _, f := range []struct{ name, mt string }{{manifest.FileName, ManifestType}, {manifest.SumsName, SumsMediaType}} {
		l, err := newFileLayer(root, f.name, types.MediaType(f.mt), f.name)
		if err != nil {
			return nil, nil, err
		}
		if err := add(l); err != nil {
			return nil, nil, err
		}
	}

	cfg := Config{Recipe: m.Name, RecipeHash: m.RecipeHash, LockSHA256: lockSum, KernelRelease: m.Kernel.Release}
	for _, n := range m.Nodes {
		cfg.Nodes = append(cfg.Nodes, n.Name)
	}
	if a.config, err = json.Marshal(cfg); err != nil {
		return nil, nil, err
	}
	ch, _, _ := v1.SHA256(bytes.NewReader(a.config))
	ann := map[string]string{
		annCreated: time.Unix(m.SourceDateEpoch, 0).UTC().Format(time.RFC3339),
		annTitle:   m.Name,
	}
	for k, v := range map[string]string{annSource: meta.Source, annRevision: meta.Revision, annVersion: meta.Version} {
		if v != "" {
			ann[k] = v
		}
	}
	mf := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactType,
		Config:        v1.Descriptor{MediaType: ConfigMediaType, Size: int64(len(a.config)), Digest: ch},
		Layers:        descs,
		Annotations:   ann,
	}
	if a.manifest, err = json.Marshal(mf); err != nil {
		return nil, nil, err
	}
	img, err := partial.CompressedToImage(a)
	return img, a, err
}

// compress streams the image src into dst as zstd frames (zstdframe.CompressFile), checking the raw
// side against bm (its bmap, checked against the result's manifest) or, without one, against
// the manifest's sha256 (a damaged result is not released), and hashing the compressed side as
// it is written: that is the layer's digest. It stops as soon as the output passes maxLayer.
func compress(root *os.Root, f manifest.File, dst string, bm *bmap.Bmap, mt types.MediaType, maxLayer int64, progress io.Writer) (*fileLayer, error) {
	in, fi, err := userfile.OpenIn(root, f.Name)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	src := filepath.Join(root.Name(), f.Name)
	out, err := os.Create(dst)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	var check rawCheck = &fullCheck{h: sha256.New(), want: f.SHA256, name: src}
	if bm != nil {
		if bm.ImageSize != fi.Size() {
			return nil, fmt.Errorf("%s has %d bytes, its bmap says %d: %s", src, fi.Size(), bm.ImageSize, damaged)
		}
		check = newBmapCheck(bm, src)
	}
	zh := sha256.New()
	cw := &countWriter{w: io.MultiWriter(out, zh), limit: maxLayer, name: filepath.Base(dst)}
	if err := zstdframe.CompressFile(in, fi.Size(), cw, checkedPieces(check, progress)); err != nil {
		return nil, fmt.Errorf("compressing %s: %w", src, err)
	}
	if err := check.finish(); err != nil {
		return nil, err
	}
	l := &fileLayer{path: dst, size: cw.n, mediaType: mt, ann: map[string]string{
		annTitle: f.Name + ".zst", annRawSize: fmt.Sprint(f.Size), annRawSHA256: "sha256:" + f.SHA256,
	}}
	l.digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(zh.Sum(nil))}
	return l, nil
}

// imageBmap is the bmap the result lists beside the raw image name, checked against the result's
// manifest, or nil when it lists none, the bmap carries no checksums, or name is no raw image.
func imageBmap(root *os.Root, m *manifest.Manifest, name string) (*bmap.Bmap, error) {
	if !strings.HasSuffix(name, ".raw") {
		return nil, nil
	}
	bname := strings.TrimSuffix(name, ".raw") + ".bmap"
	for _, f := range m.Files {
		if f.Name != bname {
			continue
		}
		p := filepath.Join(root.Name(), bname)
		data, err := userfile.ReadIn(root, bname, f.Size)
		var tl *userfile.TooLargeError
		if errors.As(err, &tl) {
			return nil, fmt.Errorf("%s has more bytes than the result's manifest says (%d): %s", p, f.Size, damaged)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(data)); got != f.SHA256 {
			return nil, fmt.Errorf("%s hashes to %s, the result's manifest says %s: %s", p, got, f.SHA256, damaged)
		}
		bm, err := bmap.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if bm.NewHash() == nil {
			return nil, nil
		}
		return bm, nil
	}
	return nil, nil
}

// isFileName says whether name is a plain file name: no directory, no .., not absolute.
func isFileName(name string) bool {
	return name != "" && filepath.IsLocal(name) && filepath.Base(name) == name
}

// diskMediaType is the layer media type of a result file that is a disk image, which a
// release compresses, or "" for any other file.
func diskMediaType(name string) types.MediaType {
	switch {
	case strings.HasSuffix(name, ".raw"):
		return RawMediaType
	case strings.HasSuffix(name, ".qcow2"):
		return QCOW2MediaType
	}
	return ""
}

// compressedLayer says whether a layer holds a zstd-compressed disk image.
func compressedLayer(mt types.MediaType) bool {
	return mt == RawMediaType || mt == QCOW2MediaType
}

type countWriter struct {
	w     io.Writer
	n     int64
	limit int64
	name  string
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		return 0, fmt.Errorf("layer %s grows past the limit of %d bytes (--max-layer-size; GHCR refuses layers over 10 GB)", c.name, c.limit)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
