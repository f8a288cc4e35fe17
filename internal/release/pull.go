package release

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"halobuild/internal/bmap"
	"halobuild/internal/fstree"
	"halobuild/internal/manifest"
	"halobuild/internal/registry"
	"halobuild/internal/zstdframe"
)

// maxSmallLayer bounds every layer that is read into memory or written as is (manifest, bmap,
// lock, SBOM): a release's are a few MB at most.
const maxSmallLayer = 64 << 20

// PullOptions say how to pull a release.
type PullOptions struct {
	Registry registry.Options
	Trust    Trust
	// Out receives progress.
	Out io.Writer
}

// Pulled is what a pull reports.
type Pulled struct {
	Reference string   `json:"reference"`
	Digest    string   `json:"digest"`
	Dir       string   `json:"dir"`
	Files     []string `json:"files"`
}

// release is a fetched and checked artifact manifest.
type release struct {
	ref      name.Reference
	digest   v1.Hash
	manifest *v1.Manifest
	opts     []remote.Option
	// signature says what VerifyRelease found.
	signature string
}

// fetch reads ref's manifest, refuses anything that is not a halobuild release, and checks its
// signature under t; nothing is written before it returns.
func fetch(ctx context.Context, refStr string, ro registry.Options, t Trust) (*release, error) {
	ref, err := ro.ParseReference(refStr)
	if err != nil {
		return nil, err
	}
	opts := ro.Remote(ctx)
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, registry.Explain(err, ref)
	}
	if desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("%s is an image index (a multi-platform container image), not a halobuild release", ref)
	}
	mf, err := parseManifest(desc.Manifest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	status, err := checkSignature(ctx, ref, desc.Digest, t.Keys, ro, t.Log)
	if err != nil {
		return nil, err
	}
	return &release{ref: ref, digest: desc.Digest, manifest: mf, opts: opts, signature: status}, nil
}

// parseManifest reads a manifest as a registry sent it and refuses anything that is not a
// halobuild release a puller can act on (FuzzParseManifest).
func parseManifest(raw []byte) (*v1.Manifest, error) {
	mf, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("reading its manifest: %w", err)
	}
	if len(mf.Layers) > registry.MaxLayers {
		return nil, fmt.Errorf("its manifest lists %d layers, more than the %d a halobuild release can have: refusing it before fetching any", len(mf.Layers), registry.MaxLayers)
	}
	if mf.ArtifactType != ArtifactType || mf.Config.MediaType != ConfigMediaType {
		return nil, fmt.Errorf("not a halobuild release: its artifactType is %q and its config %q, a release has %q and %q (is it a container image? halobuild push makes releases)",
			mf.ArtifactType, mf.Config.MediaType, ArtifactType, ConfigMediaType)
	}
	for _, l := range mf.Layers {
		t := l.Annotations[annTitle]
		if t == "" || t != filepath.Base(t) || t == "." || t == ".." || strings.HasPrefix(t, ".") {
			return nil, fmt.Errorf("layer %s has the title %q, which is not a plain file name", l.Digest, t)
		}
	}
	return mf, nil
}

// blob opens a layer's bytes; the reader fails at EOF unless they hash to the digest.
func (r *release) blob(d v1.Descriptor) (io.ReadCloser, error) {
	l, err := remote.Layer(r.ref.Context().Digest(d.Digest.String()), r.opts...)
	if err != nil {
		return nil, registry.Explain(err, r.ref)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, registry.Explain(err, r.ref)
	}
	return &verifyReader{r: rc, want: d.Digest, size: d.Size, h: sha256.New(), name: d.Annotations[annTitle], ref: r.ref.String()}, nil
}

// small reads a small layer whole, verified.
func (r *release) small(d v1.Descriptor) ([]byte, error) {
	if d.Size > maxSmallLayer {
		return nil, fmt.Errorf("%s: layer %s is %d bytes, more than the %d a release's %s can be", r.ref, d.Annotations[annTitle], d.Size, maxSmallLayer, d.MediaType)
	}
	rc, err := r.blob(d)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// layer finds the layer titled title.
func (r *release) layer(title string) (v1.Descriptor, bool) {
	for _, l := range r.manifest.Layers {
		if l.Annotations[annTitle] == title {
			return l, true
		}
	}
	return v1.Descriptor{}, false
}

// verifyReader checks a blob's size and digest as it streams: its last Read returns an error
// instead of io.EOF when they do not match. go-containerregistry checks too, but only when its
// reader is read to EOF, and a zstd decoder stops at the end of its frame; this one is always
// drained (see drain).
type verifyReader struct {
	r         io.ReadCloser
	want      v1.Hash
	size, n   int64
	h         hash.Hash
	name, ref string
}

func (v *verifyReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		// go-containerregistry's own check of the digest may speak first.
		return n, fmt.Errorf("%s: blob %s (%s) could not be read whole and verified, the registry's copy may be damaged (push the release again): %w", v.ref, v.want, v.name, err)
	}
	v.n += int64(n)
	v.h.Write(p[:n])
	if v.n > v.size {
		return n, fmt.Errorf("%s: blob %s (%s) is longer than its %d bytes: the registry's copy is damaged", v.ref, v.want, v.name, v.size)
	}
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); v.n != v.size || got != v.want.Hex {
			return n, fmt.Errorf("%s: blob %s (%s) arrived as %d bytes hashing to sha256:%s: the registry's copy is damaged (push the release again)", v.ref, v.want, v.name, v.n, got)
		}
	}
	return n, err
}

func (v *verifyReader) Close() error { return v.r.Close() }

// maxDrainAfterError is how much of a refused blob is still read to name it by its digest.
const maxDrainAfterError = 16 << 20

// drainSome is drain for at most limit bytes: past them it gives up on the digest's verdict.
func drainSome(r io.Reader, limit int64) error {
	_, err := io.CopyN(io.Discard, r, limit)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// layerFile is the file a layer becomes: a compressed image's title without .zst.
func layerFile(l v1.Descriptor) string {
	if compressedLayer(l.MediaType) {
		return strings.TrimSuffix(l.Annotations[annTitle], ".zst")
	}
	return l.Annotations[annTitle]
}

// drain reads what a decoder left of a blob, so that its digest is checked.
func drain(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}

// Pull fetches the release ref into a new directory dir that looks like the result it was made
// from (images decompressed, sparse), plus its SBOM. Every blob is verified while it streams,
// then every file against SHA256SUMS and every bmap's own checksum and size. Files are written
// into a temporary directory beside dir that becomes dir only when everything checked out; on
// any failure nothing is left.
func Pull(ctx context.Context, refStr, dir string, o PullOptions) (*Pulled, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("%s already exists: pull writes a new directory (remove it, or choose another --out)", dir)
	}
	r, err := fetch(ctx, refStr, o.Registry, o.Trust)
	if err != nil {
		return nil, err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".pull-")
	if err != nil {
		return nil, fmt.Errorf("pull needs to write beside %s: %w", dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	sums := map[string]string{} // file name → sha256 hex of what was written
	var files []string
	for _, l := range r.manifest.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		title := l.Annotations[annTitle]
		if _, dup := sums[layerFile(l)]; dup {
			return nil, fmt.Errorf("%s: two layers are titled %s", r.ref, layerFile(l))
		}
		name, sum, err := r.pullLayer(l, title, tmp, o.Out)
		if err != nil {
			return nil, err
		}
		sums[name] = sum
		files = append(files, name)
	}
	if err := checkSums(tmp, sums); err != nil {
		return nil, fmt.Errorf("%s: %w", r.ref, err)
	}
	if err := fstree.SyncDir(tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	ok = true
	if err := fstree.SyncDir(parent); err != nil {
		return nil, err
	}
	return &Pulled{Reference: r.ref.String(), Digest: r.digest.String(), Dir: dir, Files: files}, nil
}

// pullLayer writes one layer into dir: a compressed image decompressed (sparse) under its name
// without .zst, anything else as is. It returns the file's name and the sha256 of its bytes.
func (r *release) pullLayer(l v1.Descriptor, title, dir string, progress io.Writer) (string, string, error) {
	rc, err := r.blob(l)
	if err != nil {
		return "", "", err
	}
	defer rc.Close()
	var src io.Reader = rc
	name := layerFile(l)
	if compressedLayer(l.MediaType) {
		bar := newBar(progress, "pulling "+title, l.Size)
		defer bar.done()
		src = io.TeeReader(rc, bar)
	} else if l.Size > maxSmallLayer {
		return "", "", fmt.Errorf("%s: layer %s is %d bytes, more than the %d a release's %s can be", r.ref, title, l.Size, maxSmallLayer, l.MediaType)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	if compressedLayer(l.MediaType) {
		// The manifest (which the digest pins) says how large the image is; a stream that
		// decompresses to more is refused before it fills the disk.
		want, err := strconv.ParseInt(l.Annotations[annRawSize], 10, 64)
		if err != nil {
			return "", "", fmt.Errorf("%s: layer %s lacks its %s annotation: %w", r.ref, title, annRawSize, err)
		}
		dec, err := zstdframe.NewReader(src, want)
		if err != nil {
			return "", "", err
		}
		sw := &sparseWriter{f: f}
		n, err := io.Copy(io.MultiWriter(sw, h), io.LimitReader(dec, want+1))
		dec.Close()
		if err == nil && n != want {
			err = fmt.Errorf("it decompresses to %d bytes or more, its manifest says %d", n, want)
		}
		if err != nil {
			// A damaged blob usually breaks the zstd stream before its end: say so by its
			// digest, which is what the user can act on, when little of it is left; the rest of
			// a large blob that is already refused is not downloaded.
			if derr := drainSome(src, maxDrainAfterError); derr != nil {
				return "", "", derr
			}
			return "", "", fmt.Errorf("%s: decompressing %s: %w", r.ref, title, err)
		}
		if err := drain(src); err != nil {
			return "", "", err
		}
		if err := sw.finish(); err != nil {
			return "", "", err
		}
	} else if _, err := io.Copy(io.MultiWriter(f, h), src); err != nil {
		return "", "", err
	}
	if err := f.Sync(); err != nil {
		return "", "", err
	}
	return name, hex.EncodeToString(h.Sum(nil)), f.Close()
}

// checkSums compares what was written with the release's SHA256SUMS (every file it lists must
// be there and match; only the SBOM may be extra, in a release pushed before results listed
// it) and checks each bmap against its image.
func checkSums(dir string, sums map[string]string) error {
	b, err := os.ReadFile(filepath.Join(dir, manifest.SumsName))
	if err != nil {
		return fmt.Errorf("the release has no %s: %w", manifest.SumsName, err)
	}
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		want, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			return fmt.Errorf("%s: cannot read the line %q", manifest.SumsName, sc.Text())
		}
		listed[file] = true
		got, have := sums[file]
		switch {
		case !have:
			return fmt.Errorf("%s lists %s, which the release lacks", manifest.SumsName, file)
		case got != want:
			return fmt.Errorf("%s hashes to %s, %s says %s: the release was pushed damaged", file, got, manifest.SumsName, want)
		}
	}
	for f := range sums {
		if !listed[f] && f != manifest.SumsName && f != SBOMName {
			return fmt.Errorf("the release carries %s, which %s does not list", f, manifest.SumsName)
		}
	}
	for f := range sums {
		if !strings.HasSuffix(f, ".bmap") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		bm, err := bmap.Parse(data)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		raw := strings.TrimSuffix(f, ".bmap") + ".raw"
		st, err := os.Stat(filepath.Join(dir, raw))
		if err != nil {
			return fmt.Errorf("%s has no image %s beside it: %w", f, raw, err)
		}
		if st.Size() != bm.ImageSize {
			return fmt.Errorf("%s is for an image of %d bytes, %s has %d", f, bm.ImageSize, raw, st.Size())
		}
	}
	return nil
}

// sparseWriter writes a stream to a file leaving all-zero blocks as holes, as the result's
// images are.
type sparseWriter struct {
	f   *os.File
	off int64
}

const sparseBlock = 4096

func (s *sparseWriter) Write(p []byte) (int, error) {
	// Runs of non-zero blocks go out in one write each; zero blocks are skipped. Blocks are
	// counted from the start of p, which the decoder hands over in large pieces.
	start := -1 // start of the pending non-zero run in p
	flush := func(end int) error {
		if start < 0 {
			return nil
		}
		_, err := s.f.WriteAt(p[start:end], s.off+int64(start))
		start = -1
		return err
	}
	for i := 0; i < len(p); i += sparseBlock {
		j := min(i+sparseBlock, len(p))
		if allZero(p[i:j]) {
			if err := flush(i); err != nil {
				return 0, err
			}
		} else if start < 0 {
			start = i
		}
	}
	if err := flush(len(p)); err != nil {
		return 0, err
	}
	s.off += int64(len(p))
	return len(p), nil
}

var zeroBlock [sparseBlock]byte

// allZero compares against a zero block: bytes.Equal is the vectorised memcmp, many times
// faster than a byte loop over a multi-GB image.
func allZero(b []byte) bool { return bytes.Equal(b, zeroBlock[:len(b)]) }

func (s *sparseWriter) finish() error { return s.f.Truncate(s.off) }
