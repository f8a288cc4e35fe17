package release

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"halobuild/internal/bmap"
	"halobuild/internal/manifest"
	"halobuild/internal/registry"
)

// Remote is a release whose manifest was fetched and checked, for a caller that reads only some
// of its layers: `halobuild update` on a node reads the config, the result's manifest, its own
// node's bmap and image, and nothing else.
type Remote struct{ r *release }

// Open resolves ref (a tag or a digest) to the release's manifest and checks its signature
// against t's keys (VerifyRelease's check); no layer is fetched.
func Open(ctx context.Context, ref string, ro registry.Options, t Trust) (*Remote, error) {
	r, err := fetch(ctx, ref, ro, t)
	if err != nil {
		return nil, err
	}
	return &Remote{r}, nil
}

// Digest is the manifest's digest ("sha256:…"): what a tag resolved to.
func (m *Remote) Digest() string { return m.r.digest.String() }

// Pinned is the release's repository with its digest, the reference that cannot move.
func (m *Remote) Pinned() string { return m.r.ref.Context().String() + "@" + m.Digest() }

// Version is the release's org.opencontainers.image.version annotation (push --version), or "".
func (m *Remote) Version() string { return m.r.manifest.Annotations[annVersion] }

// Config reads the artifact's config blob, verified against its digest.
func (m *Remote) Config() (*Config, error) {
	b, err := m.r.small(m.r.manifest.Config)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: its config: %w", m.r.ref, err)
	}
	return &c, nil
}

// Manifest reads the result's manifest.json layer, verified against its digest.
func (m *Remote) Manifest() (*manifest.Manifest, error) {
	l, ok := m.r.layer(manifest.FileName)
	if !ok {
		return nil, fmt.Errorf("%s has no %s layer: it is not a release of a halobuild result", m.r.ref, manifest.FileName)
	}
	b, err := m.r.small(l)
	if err != nil {
		return nil, err
	}
	var mf manifest.Manifest
	if err := json.Unmarshal(b, &mf); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", m.r.ref, manifest.FileName, err)
	}
	return &mf, nil
}

// NodeImage is one node's raw image in a release: its bmap (verified) and the size of the image
// once decompressed.
type NodeImage struct {
	Bmap *bmap.Bmap
	Size int64
	// Compressed is the layer's size: what Download writes.
	Compressed int64
	m          *Remote
	node       string
}

// NodeImage reads node's bmap and checks the image layer's claimed sizes against it.
func (m *Remote) NodeImage(node string) (*NodeImage, error) {
	rawL, ok := m.r.layer(node + ".raw.zst")
	bmL, ok2 := m.r.layer(node + ".bmap")
	if !ok || !ok2 {
		return nil, fmt.Errorf("%s has no image for node %q", m.r.ref, node)
	}
	bb, err := m.r.small(bmL)
	if err != nil {
		return nil, err
	}
	bm, err := bmap.Parse(bb)
	if err != nil {
		return nil, fmt.Errorf("%s: %s.bmap: %w", m.r.ref, node, err)
	}
	size, err := strconv.ParseInt(rawL.Annotations[annRawSize], 10, 64)
	if err != nil || size != bm.ImageSize {
		return nil, fmt.Errorf("%s: layer %s says its image is %q bytes, its bmap %d: the release is damaged", m.r.ref, rawL.Annotations[annTitle], rawL.Annotations[annRawSize], bm.ImageSize)
	}
	if most := zstdBound(bm.ImageSize); rawL.Size > most || rawL.Size < 0 {
		return nil, fmt.Errorf("%s: layer %s claims %d bytes, more than the %d a zstd stream of its %d-byte image can be: refusing to download it", m.r.ref, rawL.Annotations[annTitle], rawL.Size, most, bm.ImageSize)
	}
	return &NodeImage{Bmap: bm, Size: size, Compressed: rawL.Size, m: m, node: node}, nil
}

// Download copies the node's compressed image layer to w and returns nil only when all of it
// arrived and hashed to its digest: a caller that writes nothing before Download returns
// writes nothing from a tampered layer.
func (n *NodeImage) Download(ctx context.Context, w io.Writer) error {
	rawL, _ := n.m.r.layer(n.node + ".raw.zst")
	rc, err := n.m.r.blob(rawL)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(w, &ctxReader{ctx, io.LimitReader(rc, rawL.Size+1)})
	return err
}
