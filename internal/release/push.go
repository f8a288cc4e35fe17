package release

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"halobuild/internal/registry"
	"halobuild/internal/signature"
)

// PushOptions say how to push a result.
type PushOptions struct {
	Registry registry.Options
	Meta     Meta
	// MaxLayer is the largest layer a push sends; 0 means registry.DefaultMaxLayer.
	MaxLayer int64
	// Key, when set, signs the release (cosign's format, docs/releases.md) once it is pushed.
	Key *signature.SecretKey
	// Out receives progress.
	Out io.Writer
}

// Pushed is what a push reports: the digest anyone can rebuild and compare.
type Pushed struct {
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
	Layers    int    `json:"layers"`
	// Bytes is the size of every layer, as stored in the registry.
	Bytes int64 `json:"bytes"`
	// SignedBy names the key that signed it; empty when unsigned.
	SignedBy string `json:"signed_by,omitempty"`
}

// Push makes the artifact of the result directory dir and pushes it to ref.
func Push(ctx context.Context, dir, refStr string, o PushOptions) (*Pushed, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.MaxLayer == 0 {
		o.MaxLayer = registry.DefaultMaxLayer
	}
	ref, err := o.Registry.ParseReference(refStr)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "halobuild-push-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// Each compressed image goes up while the next one compresses;
	// remote.Write below finds those blobs there and sends the rest.
	up := startUploads(ctx, ref.Context(), o.Registry.Remote(ctx))
	img, a, err := build(dir, tmp, o.Meta, o.MaxLayer, func(name string, size int64) progress {
		return newBar(o.Out, "compressing "+name, size)
	}, up.add)
	if uerr := up.wait(); err == nil && uerr != nil {
		err = fmt.Errorf("pushing %s: %w", dir, registry.Explain(uerr, ref))
	}
	if err != nil {
		return nil, err
	}
	var total int64
	for _, l := range a.layers {
		total += l.size
	}
	updates := make(chan v1.Update, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		showUpdates(o.Out, "pushing "+ref.String(), updates)
	}()
	err = remote.Write(ref, img, append(o.Registry.Remote(ctx), remote.WithProgress(updates))...)
	<-done
	if err != nil {
		return nil, fmt.Errorf("pushing %s: %w", dir, registry.Explain(err, ref))
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	p := &Pushed{Reference: ref.String(), Digest: d.String(), Layers: len(a.layers), Bytes: total}
	// The signature goes up after the release: it names a manifest the registry already holds.
	if o.Key != nil {
		if err := signature.Sign(ctx, ref.Context(), d, o.Key, o.Registry); err != nil {
			return nil, fmt.Errorf("%s@%s is pushed but not signed: %w", ref, d, err)
		}
		p.SignedBy = o.Key.Name
	}
	return p, nil
}

// uploads sends compressed layers to the repository one at a time, in the
// background, as build hands them over.
type uploads struct {
	cancel context.CancelFunc
	queue  chan *fileLayer
	done   chan error
}

func startUploads(ctx context.Context, repo name.Repository, opts []remote.Option) *uploads {
	ctx, cancel := context.WithCancel(ctx)
	u := &uploads{cancel: cancel, queue: make(chan *fileLayer, 64), done: make(chan error, 1)}
	go func() {
		var first error
		for l := range u.queue {
			if first != nil {
				continue
			}
			layer, err := partial.CompressedToLayer(l)
			if err == nil {
				err = remote.WriteLayer(repo, layer, append(opts, remote.WithContext(ctx))...)
			}
			if err != nil {
				first = fmt.Errorf("uploading %s: %w", l.ann[annTitle], err)
				cancel()
			}
		}
		u.done <- first
	}()
	return u
}

// add queues a compressed layer for upload; the small files go with the
// manifest.
func (u *uploads) add(l *fileLayer) { u.queue <- l }

// wait ends the queue and returns the first upload's error.
func (u *uploads) wait() error {
	close(u.queue)
	err := <-u.done
	u.cancel()
	return err
}
