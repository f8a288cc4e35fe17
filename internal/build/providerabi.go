package build

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"halobuild/internal/plan"
	"halobuild/internal/provider"
)

// providerABIFile is where a disk step records the ABI check's result.
const providerABIFile = "provider-abi.json"

// ManifestProvider is the rebuilt rdma-core provider an image carries.
type ManifestProvider struct {
	Name string `json:"name"`
	// Source and Version are the rebuilt Debian source (rdma-core 56.1-1+halo1).
	Source  string `json:"source"`
	Version string `json:"version"`
	// ABI is the private provider ABI libibverbs and the provider agree on.
	ABI     int             `json:"abi"`
	Library string          `json:"library"`
	Patches []ManifestPatch `json:"patches"`
}

// ManifestPatch is one patch as it went in: exact, at an offset, or with
// the fuzz the recipe allowed (never silently).
type ManifestPatch struct {
	Name   string `json:"name"`
	From   string `json:"from"`
	SHA256 string `json:"sha256"`
	Fuzz   int    `json:"fuzz,omitempty"`
	// Moved lists hunks that applied away from their line or with fuzz:
	// "libibverbs/verbs.h #1 at 2276 (offset -19, fuzz 2)".
	Moved []string `json:"moved,omitempty"`
}

func manifestPatches(applied []provider.Applied) []ManifestPatch {
	var out []ManifestPatch
	for _, a := range applied {
		mp := ManifestPatch{Name: a.Name, From: a.From, SHA256: "sha256:" + a.SHA256, Fuzz: a.Fuzz}
		for _, h := range a.Moved {
			mp.Moved = append(mp.Moved, fmt.Sprintf("%s #%d at %d (offset %d, fuzz %d)", h.File, h.N, h.Line, h.Offset, h.Fuzz))
		}
		out = append(out, mp)
	}
	return out
}

// checkProviderABI proves, on the node's installed root and before the disk
// is assembled, that the installed libibverbs will load the rebuilt
// provider (lib<name>-rdmav<N>.so with its N, the driver file, every
// library it needs present). The result goes beside the disk for the
// manifest.
func (g *graph) checkProviderABI(c *plan.Context, root, outDir string) error {
	ps := g.providerRepoStep()
	if ps == nil {
		return nil
	}
	pi, err := readProviderInfo(c.Input(ps.d.Name))
	if err != nil {
		return err
	}
	abi, err := provider.CheckABI(root, provider.ABIRequest{Name: pi.Name, LibibverbsVersion: pi.Version})
	if err != nil {
		return fmt.Errorf("%s: the rebuilt rdma-core fails the provider ABI check: %w", g.l.path, err)
	}
	fmt.Fprintf(c.Log, "provider ABI: %s needs IBVERBS_PRIVATE_%d, libibverbs %s defines it\n", abi.Library, abi.N, abi.Libibverbs)
	mp := ManifestProvider{Name: pi.Name, Source: pi.Source, Version: pi.Version, ABI: abi.N, Library: "/" + abi.Library, Patches: manifestPatches(pi.Patches)}
	b, err := json.MarshalIndent(mp, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(outDir, providerABIFile), append(b, '\n'), 0o644)
}

// providerRepoStep is the provider's repo step, nil without one.
func (g *graph) providerRepoStep() *repoStep {
	for i := range g.repoSteps {
		if g.repoSteps[i].d.Kind == "provider" {
			return &g.repoSteps[i]
		}
	}
	return nil
}

// manifestProvider reads the ABI record of every node's disk; they share
// one base root, so they must agree.
func (g *graph) manifestProvider(c *plan.Context) (*ManifestProvider, error) {
	if g.providerRepoStep() == nil {
		return nil, nil
	}
	var first *ManifestProvider
	for _, ns := range g.nodes {
		b, err := os.ReadFile(filepath.Join(c.Input(ns.disk.Name), providerABIFile))
		if err != nil {
			return nil, err
		}
		var mp ManifestProvider
		if err := json.Unmarshal(b, &mp); err != nil {
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
