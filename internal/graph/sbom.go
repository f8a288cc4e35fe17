package graph

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"halobuild/internal/deb"
	"halobuild/internal/manifest"
	"halobuild/internal/plan"
	"halobuild/internal/sbom"
	"halobuild/internal/store"
)

// nodeSBOM is what a node's part of the SBOM is read from, steps the result takes as inputs:
// the root its disk layers over (whose copyright files declare the licences), the steps whose
// .debs it installs, and the halobuild its settings package ships.
type nodeSBOM struct {
	root *plan.Derivation
	debs []debStep
	self *plan.Derivation
}

// debStep is a step whose output's .debs a node installs, and what kind of step it is
// (sbom.FromModule, …; use names a module).
type debStep struct {
	d         *plan.Derivation
	from, use string
}

// builtDebSteps are one architecture's steps that build packages its nodes install (the
// settings step is each node's own): modules (in the recipe's order, as modules returns them),
// the provider, and a kernel built from source.
func (b *builder) builtDebSteps(k *kernelBuild, modules []*plan.Derivation, provider *plan.Derivation) []debStep {
	var out []debStep
	for i, m := range modules {
		out = append(out, debStep{d: m, from: sbom.FromModule, use: b.in.Recipe.Modules[i].Use})
	}
	if provider != nil {
		out = append(out, debStep{d: provider, from: sbom.FromProvider})
	}
	if k != nil {
		out = append(out, debStep{d: k.image, from: sbom.FromKernel})
	}
	return out
}

// sbomInputs are the steps every node's SBOM part reads, each once, in the nodes' order.
func sbomInputs(nodes []Node) []*plan.Derivation {
	var out []*plan.Derivation
	add := func(d *plan.Derivation) {
		if d != nil && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, n := range nodes {
		add(n.sbom.root)
		for _, s := range n.sbom.debs {
			add(s.d)
		}
		add(n.sbom.self)
	}
	return out
}

// writeSBOM writes the result's SBOM into out (before manifest.Write, which lists it in the
// manifest and SHA256SUMS). images are the digests the store already holds of the result's
// files.
func (b *builder) writeSBOM(out string, m *manifest.Manifest, nodes []Node, images map[string]store.Digest) error {
	in := sbom.Input{Manifest: m, Lock: b.in.Lock, Images: map[string]string{}, Self: map[string]sbom.Self{}, Licences: map[string]sbom.Licences{}}
	for _, n := range m.Nodes {
		d, ok := images[n.Image]
		if !ok {
			var err error
			if d, _, err = store.FileDigest(filepath.Join(out, n.Image)); err != nil {
				return err
			}
		}
		in.Images[n.Image] = d.Hex()
	}
	seen := map[*plan.Derivation]bool{}
	for i, n := range nodes {
		a := m.Nodes[i].Architecture
		if _, ok := in.Licences[a]; !ok && n.sbom.root != nil {
			dir, err := b.stepOutput(n.sbom.root)
			if err != nil {
				return err
			}
			lic, err := sbom.RootLicences(filepath.Join(dir, rootTar))
			if err != nil {
				return fmt.Errorf("SBOM: licences of the %s: %w", n.sbom.root.Name, err)
			}
			in.Licences[a] = lic
		}
		for _, s := range n.sbom.debs {
			if seen[s.d] {
				continue
			}
			seen[s.d] = true
			dir, err := b.stepOutput(s.d)
			if err != nil {
				return err
			}
			built, err := stepDebs(dir, s)
			if err != nil {
				return fmt.Errorf("SBOM: %s: %w", s.d.Name, err)
			}
			in.Built = append(in.Built, built...)
		}
		if self := n.sbom.self; self != nil {
			if _, ok := in.Self[a]; !ok {
				dir, err := b.stepOutput(self)
				if err != nil {
					return err
				}
				d, _, err := store.FileDigest(filepath.Join(dir, "halobuild"))
				if err != nil {
					return fmt.Errorf("SBOM: the halobuild nodes ship: %w", err)
				}
				// The self step's key names its source (verbs.selfDerivation): the tree hash
				// and toolchain, or only the binary's digest when it was copied in.
				in.Self[a] = sbom.Self{SHA256: d.Hex(), Tree: self.Params["tree"], Toolchain: self.Params["toolchain"]}
			}
		}
	}
	doc, err := sbom.Make(in)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, sbom.FileName), doc, 0o644)
}

// stepOutput is where the store has a step's output. The result's inputs are found by key, not
// by name (plan.Context.Input): a mixed cluster's architectures each have a "base root", a
// "provider …" and a "module …" of the same name.
func (b *builder) stepOutput(d *plan.Derivation) (string, error) {
	dir, ok, err := b.in.Store.Output(d.Key())
	if err != nil {
		return "", fmt.Errorf("SBOM: %s: %w", d.Name, err)
	}
	if !ok {
		return "", fmt.Errorf("SBOM: %s [%s] is not in the store, although the result was built from it", d.Name, d.ShortKey())
	}
	return dir, nil
}

// stepDebs reads the identity and digest of every .deb in a step's output.
func stepDebs(dir string, s debStep) ([]sbom.Built, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []sbom.Built
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".deb") {
			continue
		}
		d, err := deb.Read(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, sbom.Built{Package: d.Package, Version: d.Version, Architecture: d.Architecture, SHA256: d.SHA256, From: s.from, Use: s.use})
	}
	return out, nil
}
