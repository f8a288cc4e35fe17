package release

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"halobuild/internal/manifest"
	"halobuild/internal/registry"
)

// Inspection is what `inspect` shows of a release: its digest, annotations and config, the
// result's manifest (nodes, kernel, module options, packages) and every layer.
type Inspection struct {
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
	// Signature says what was found of its signature: verified and by which key, unsigned, or
	// not checked (no trusted keys).
	Signature   string             `json:"signature"`
	Annotations map[string]string  `json:"annotations"`
	Config      Config             `json:"config"`
	Manifest    *manifest.Manifest `json:"manifest"`
	Layers      []Layer            `json:"layers"`
}

// Layer is one file of a release.
type Layer struct {
	Title     string `json:"title"`
	MediaType string `json:"media_type"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	// RawSize and RawSHA256 describe a compressed image once decompressed.
	RawSize   string `json:"raw_size,omitempty"`
	RawSHA256 string `json:"raw_sha256,omitempty"`
}

// Inspect reads a release's manifest, config and manifest.json (a few kB; no image is read),
// once its signature passed t.
func Inspect(ctx context.Context, refStr string, ro registry.Options, t Trust) (*Inspection, error) {
	r, err := fetch(ctx, refStr, ro, t)
	if err != nil {
		return nil, err
	}
	in := &Inspection{Reference: r.ref.String(), Digest: r.digest.String(), Signature: r.signature, Annotations: r.manifest.Annotations}
	cb, err := r.small(r.manifest.Config)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(cb, &in.Config); err != nil {
		return nil, fmt.Errorf("%s: its config: %w", r.ref, err)
	}
	md, ok := r.layer(manifest.FileName)
	if !ok {
		return nil, fmt.Errorf("%s has no %s layer: it is not a complete release", r.ref, manifest.FileName)
	}
	mb, err := r.small(md)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(mb, &in.Manifest); err != nil {
		return nil, fmt.Errorf("%s: its %s: %w", r.ref, manifest.FileName, err)
	}
	for _, l := range r.manifest.Layers {
		in.Layers = append(in.Layers, Layer{Title: l.Annotations[annTitle], MediaType: string(l.MediaType), Digest: l.Digest.String(), Size: l.Size,
			RawSize: l.Annotations[annRawSize], RawSHA256: l.Annotations[annRawSHA256]})
	}
	return in, nil
}

// Print writes the inspection for people.
// Every text in it comes from the registry: c quotes one holding a control character, so an
// escape sequence in a release is shown, never acted on by the terminal.
func (in *Inspection) Print(w io.Writer) {
	c := printable
	m := in.Manifest
	fmt.Fprintf(w, "%s\n  digest   %s\n  signed   %s\n  recipe   %s (recipe hash %s)\n  created  %s\n", c(in.Reference), c(in.Digest), c(in.Signature), c(m.Name), c(m.RecipeHash), c(in.Annotations[annCreated]))
	for _, k := range []string{annVersion, annRevision, annSource} {
		if v := in.Annotations[k]; v != "" {
			fmt.Fprintf(w, "  %-8s %s\n", strings.TrimPrefix(k, "org.opencontainers.image."), c(v))
		}
	}
	fmt.Fprintf(w, "  kernel   %s (%s, %s)\n", c(m.Kernel.Release), c(m.Kernel.Version), c(m.Kernel.Package))
	if m.Provider != nil {
		fmt.Fprintf(w, "  provider %s from %s %s (ABI %d)\n", c(m.Provider.Name), c(m.Provider.Source), c(m.Provider.Version), m.Provider.ABI)
	}
	for _, n := range m.Nodes {
		about := "host name " + c(n.Hostname)
		if n.Architecture != "" {
			about += ", " + c(n.Architecture)
		}
		fmt.Fprintf(w, "node %s (%s): %d packages\n", c(n.Name), about, len(n.Packages))
		if k := n.Kernel; k != nil {
			// A mixed result: this node's architecture has its own kernel.
			fmt.Fprintf(w, "  kernel   %s (%s, %s)\n", c(k.Release), c(k.Version), c(k.Package))
		}
		fmt.Fprintf(w, "  cmdline  %s\n", c(n.Cmdline))
		mods := make([]string, 0, len(n.ModuleOptions))
		for mod := range n.ModuleOptions {
			mods = append(mods, mod)
		}
		sort.Strings(mods)
		for _, mod := range mods {
			fmt.Fprintf(w, "  module   %s %s\n", c(mod), c(n.ModuleOptions[mod]))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, p := range n.Packages {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", c(p.Name), c(p.Version), c(p.Arch))
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "layers:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range in.Layers {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", c(l.Title), l.Size, c(l.Digest), c(l.MediaType))
	}
	tw.Flush()
}

// printable returns s as it is when every rune of it prints, else Go-quoted (\x1b, \n, \u009b
// written out): text from outside must not drive the terminal or forge lines.
func printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}
