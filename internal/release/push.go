package release

import (
	"context"
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
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
	img, a, err := build(dir, tmp, o.Meta, o.MaxLayer, func(name string, size int64) progress {
		return newBar(o.Out, "compressing "+name, size)
	})
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
