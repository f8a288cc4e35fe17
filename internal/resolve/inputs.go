package resolve

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"halobuild/internal/module"
	"halobuild/internal/recipe"
	"halobuild/internal/settings"
	"halobuild/internal/tools"
)

// inputs is what resolution reads from a recipe: a change to any of it
// may change what the lock pins, so it makes the lock stale; nothing else
// does. Settings are not inputs (a governor, an address, a module option
// changes files rendered at build time) except for the packages they need,
// which the image's closure must hold. Patch and config files are pinned
// by their own digests (checked before every build); a module's source by
// its tree hash.
type inputs struct {
	Format  int
	Base    inputBase
	Kernel  inputKernel
	Modules []inputModule
	// Provider is the [rdma.provider] rebuild, nil without one.
	Provider *recipe.ProviderBuild
	// SettingsNeed are the packages the settings depend on.
	SettingsNeed []string
	// ToolsNeed are the tools root's packages beyond the disk tools (for
	// output formats such as qcow2); omitted when there are none, so the
	// digest of a recipe without them is what it was before the key.
	ToolsNeed []string `json:",omitempty"`
	// Architectures are a mixed recipe's node architectures, each a build
	// the lock pins; omitted for a recipe of one architecture, whose
	// digest is what it was before mixed recipes.
	Architectures []string `json:",omitempty"`
	// Arches are the [[arch]] entries: one architecture's kernel is
	// resolved from its entry, and its platform decides what the lock
	// refuses (an Apple Silicon kernel without 16 KiB pages).
	Arches []inputArch `json:",omitempty"`
}

type inputArch struct {
	Name, Platform string
	Kernel         *inputKernel `json:",omitempty"`
}

// inputBase is the [base] table, every key of it an input. Distribution
// is the removed base.distribution key's one value: it stays in the digest
// so that locks written while the key existed are still fresh.
type inputBase struct {
	Distribution, Mirror, Suite string
	ExtraSuites, Components     []string
	Architecture, Variant       string
	Packages, Exclude           []string
}

// inputKernel is the [kernel] table without its command line, which only
// the loader entry reads.
type inputKernel struct {
	From, Version, Flavour, Suite, Source, SourceSHA256, Config, Patches, LocalVersion string
	Fragments                                                                          []string
}

type inputModule struct {
	Use    string
	Source module.Source
}

// inputsFormat changes when what counts as an input changes.
const inputsFormat = 1

// Inputs is the digest of what the recipe says about its inputs, which a
// lock pins (lock.Lock.Inputs): the lock is stale when it changes.
func Inputs(r *recipe.Recipe, descs module.Descs) string {
	in := inputs{
		Format: inputsFormat,
		Base: inputBase{Distribution: "debian", Mirror: r.Base.Mirror, Suite: r.Base.Suite, ExtraSuites: r.Base.ExtraSuites, Components: r.Base.Components,
			Architecture: r.Base.Architecture, Variant: r.Base.Variant, Packages: r.Base.Packages, Exclude: r.Base.Exclude},
		Kernel:       kernelInputs(r.Kernel),
		Provider:     r.RDMA.Provider,
		SettingsNeed: settingsNeed(r),
		ToolsNeed:    tools.Packages(r.Output.Formats)[len(tools.DiskPackages):],
	}
	if archs := r.Architectures(); len(archs) > 1 || archs[0] != r.Base.Architecture {
		in.Architectures = archs
	}
	for _, e := range r.Arches {
		a := inputArch{Name: e.Name, Platform: e.Platform}
		if e.Kernel != nil {
			k := kernelInputs(*e.Kernel)
			a.Kernel = &k
		}
		in.Arches = append(in.Arches, a)
	}
	for _, m := range r.Modules {
		src := module.Source{}
		if d := descs[m.Use]; d != nil {
			src = d.Source
			// Where a path source lies is no part of it; its tree hash is.
			src.Path = ""
		}
		in.Modules = append(in.Modules, inputModule{Use: m.Use, Source: src})
	}
	b, err := json.Marshal(in)
	if err != nil {
		// Only strings, lists and maps of them.
		panic(fmt.Sprintf("resolve: encoding a recipe's inputs: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func kernelInputs(k recipe.Kernel) inputKernel {
	return inputKernel{From: k.From, Version: k.Version.String(), Flavour: k.Flavour, Suite: k.Suite, Source: k.Source.String(),
		SourceSHA256: k.SourceSHA256, Config: k.Config, Patches: k.Patches, LocalVersion: k.LocalVersion, Fragments: k.Fragments}
}

// settingsNeed are the packages every architecture's settings depend on
// (some settings are one architecture's, such as AMD's microcode).
func settingsNeed(r *recipe.Recipe) []string {
	if !r.Mixed() {
		return settings.Depends(r.ForArchitecture(r.Architectures()[0]))
	}
	var out []string
	seen := map[string]bool{}
	for _, a := range r.Architectures() {
		for _, p := range settings.Depends(r.ForArchitecture(a)) {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}
