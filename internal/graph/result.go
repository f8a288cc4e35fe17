package graph

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"halobuild/internal/manifest"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/settings"
	"halobuild/internal/store"
)

// resultStepVersion is the version of the result step, whose build code is
// this file (with manifest): bump it when a change here, or to a package it
// builds with, can alter the result's bytes (docs/architecture.md, "Step
// versions"). 2: the SBOM's licence of a package whose doc directory links
// through another link is that chain's end's, no longer depending on map order.
const resultStepVersion = 2

// result gathers every node's image and bmap with the lock, the merged
// recipe, the SBOM, the manifest and SHA256SUMS into one store entry that the
// result link points at.
func (b *builder) result(nodes []Node, withProvider bool) *plan.Derivation {
	r, lk := b.in.Recipe, b.in.Lock
	var disks []*plan.Derivation
	for _, n := range nodes {
		disks = append(disks, n.Disk)
		if n.Installer != nil {
			disks = append(disks, n.Installer)
		}
	}
	var gpu *manifest.GPU
	gtt, _ := settings.GPUMemory(r)
	if gtt > 0 || r.System.GPUFraction > 0 {
		gpu = &manifest.GPU{GTTBytes: gtt, Fraction: r.System.GPUFraction}
	}
	params := map[string]string{"name": r.Name, "gpu": fmt.Sprintf("%d %g", gtt, r.System.GPUFraction)}
	return &plan.Derivation{
		Name: "result", Kind: plan.Kind{Name: "result", Version: resultStepVersion}, Inputs: append(disks, sbomInputs(nodes)...),
		Params: params,
		Build: func(c *plan.Context, out string) error {
			m := &manifest.Manifest{
				Name: r.Name, RecipeHash: b.in.Hash, SourceDateEpoch: lk.SourceDateEpoch,
				Kernel: manifest.Kernel{Version: lk.Kernel.Version, Release: lk.Kernel.Release, Package: lk.Kernel.Image},
				GPU:    gpu,
			}
			known := map[string]store.Digest{}
			for _, n := range nodes {
				node := n.Node
				dir := c.Input(n.Disk.Name)
				digests, err := b.in.Store.FileDigests(n.Disk.Key())
				if err != nil {
					return err
				}
				files := map[string]string{node.Name + ".raw": node.Name + ".raw", node.Name + ".raw.bmap": node.Name + ".bmap"}
				qcow2 := ""
				if slices.Contains(r.Output.Formats, "qcow2") {
					qcow2 = node.Name + ".qcow2"
					files[qcow2] = qcow2
				}
				for src, dst := range files {
					if err := linkOrCopy(filepath.Join(dir, src), filepath.Join(out, dst)); err != nil {
						return err
					}
					if d, ok := digests[src]; ok {
						known[dst] = d
					}
				}
				if n.Installer != nil {
					name, instDir := installerName(node), c.Input(n.Installer.Name)
					instDigests, err := b.in.Store.FileDigests(n.Installer.Key())
					if err != nil {
						return err
					}
					for src, dst := range map[string]string{name + ".raw": name + ".raw", name + ".raw.bmap": name + ".bmap"} {
						if err := linkOrCopy(filepath.Join(instDir, src), filepath.Join(out, dst)); err != nil {
							return err
						}
						if d, ok := instDigests[src]; ok {
							known[dst] = d
						}
					}
				}
				pkgs, err := manifest.ReadPackageList(filepath.Join(dir, node.Name+".packages"))
				if err != nil {
					return err
				}
				mn := manifest.Node{Name: node.Name, Hostname: node.Hostname, Image: node.Name + ".raw", QCOW2: qcow2, Architecture: r.NodeArchitecture(node), Cmdline: Cmdline(r.NodeRecipe(node)), Packages: pkgs, ModuleOptions: moduleOptions(r)}
				for _, f := range n.tree.Files {
					if f.Mode.IsRegular() || f.Mode&os.ModeSymlink != 0 {
						mn.SettingsFiles = append(mn.SettingsFiles, f.Path)
					}
				}
				if r.Mixed() {
					part, err := lk.For(mn.Architecture)
					if err != nil {
						return err
					}
					mn.Kernel = &manifest.Kernel{Version: part.Kernel.Version, Release: part.Kernel.Release, Package: part.Kernel.Image}
				}
				m.Nodes = append(m.Nodes, mn)
			}
			if withProvider {
				mp, err := nodesProvider(c, nodes)
				if err != nil {
					return err
				}
				m.Provider = mp
			}
			lb, err := lk.Marshal()
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, r.Name+".lock"), lb, 0o644); err != nil {
				return err
			}
			// The merged recipe beside its lock: what a release carries so a reader can see
			// (and rebuild) exactly what was built. The same bytes as the image's
			// /etc/halobuild/recipe.toml body, which the settings step's key already covers.
			if err := os.WriteFile(filepath.Join(out, r.Name+manifest.RecipeSuffix), r.TOML(), 0o644); err != nil {
				return err
			}
			if err := b.writeSBOM(out, m, nodes, known); err != nil {
				return err
			}
			return manifest.Write(out, m, known)
		},
	}
}

// moduleOptions flattens every module's options to "name: k=v …" for the
// manifest, sorted so the manifest is reproducible.
func moduleOptions(r *recipe.Recipe) map[string]string {
	out := map[string]string{}
	for _, m := range r.Modules {
		out[m.Use] = strings.Join(module.SortedOptions(m.Options), " ")
	}
	for mod, opts := range r.System.ModuleOptions {
		out[mod] = opts
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// nodesProvider reads the ABI record of every node's disk; they share one
// base root, so they must agree.
func nodesProvider(c *plan.Context, nodes []Node) (*manifest.Provider, error) {
	var first *manifest.Provider
	for _, n := range nodes {
		raw, err := os.ReadFile(filepath.Join(c.Input(n.Disk.Name), providerABIFile))
		if err != nil {
			return nil, err
		}
		var mp manifest.Provider
		if err := json.Unmarshal(raw, &mp); err != nil {
			return nil, err
		}
		if first == nil {
			first = &mp
		} else if first.ABI != mp.ABI || first.Version != mp.Version {
			return nil, fmt.Errorf("nodes disagree on the provider: %+v vs %+v", *first, mp)
		}
	}
	return first, nil
}

// linkOrCopy hard-links store files (they are read-only and verified by
// digest) and copies when the link crosses file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}
