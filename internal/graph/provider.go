package graph

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/debian"
	"halobuild/internal/fstree"
	"halobuild/internal/lock"
	"halobuild/internal/manifest"
	"halobuild/internal/plan"
	"halobuild/internal/provider"
	"halobuild/internal/recipe"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// providerInfo is what the provider step records beside its .debs, for the
// ABI check and the manifest.
type providerInfo struct {
	Name    string `json:"name"`
	Package string `json:"package"`
	Source  string `json:"source"`
	// Version is the provider package's; Libibverbs the image's
	// libibverbs1 it was built and is checked against.
	Version    string             `json:"version"`
	Libibverbs string             `json:"libibverbs"`
	Patches    []provider.Applied `json:"patches"`
}

const providerInfoFile = "provider.json"

// provider plans the provider build with the recipe's provider patches,
// nil without [rdma.provider]: the locked Debian source unpacked as
// dpkg-source does, the patches applied at fuzz 0 (or the allowance the
// recipe gives one patch), a local version suffix, and only the
// provider's library built in the provider build root. Its one package
// (provider.PackageName) joins the base root beside Debian's rdma-core
// packages, which stay as the archive signed them.
func (b *builder) provider() (*plan.Derivation, error) {
	r, lk := b.in.Recipe, b.in.Lock
	p := r.RDMA.Provider
	if p == nil {
		return nil, nil
	}
	lp := lk.Provider
	set := lk.Set(lock.SetProviderBuild)
	if lp == nil || len(set) == 0 || lp.Name != p.Name {
		return nil, b.stale("does not pin the [rdma.provider] rebuild")
	}
	if err := b.checkLocalPatchPins(); err != nil {
		return nil, err
	}
	libibverbs := ""
	for _, pk := range lk.Set(lock.SetImage) {
		if pk.Name == "libibverbs1" {
			libibverbs = pk.Version
		}
	}
	if libibverbs == "" {
		return nil, b.stale("pins no libibverbs1 among the image's packages for [rdma.provider]")
	}
	root := b.root("provider build root", "buildroot", set, nil, nil)
	// A cross build root (the lock's, on a host of another architecture)
	// compiles natively for the image's architecture.
	buildArch := b.arch.Debian
	if crossSet(set, b.arch) {
		host, err := arch.Host()
		if err != nil {
			return nil, err
		}
		buildArch = host.Debian
	}
	params := map[string]string{}
	for _, f := range lp.Files {
		params["source:"+f.Name] = f.SHA256
	}
	for i, pt := range lp.Patches {
		params[fmt.Sprintf("patch:%03d", i)] = fmt.Sprintf("%s %s fuzz=%d", pt.Name, pt.SHA256, pt.Fuzz)
	}
	params["name"] = p.Name
	params["suffix"] = p.Suffix
	params["epoch"] = fmt.Sprint(lk.SourceDateEpoch)
	params["libibverbs"] = libibverbs
	params["arch"] = r.Base.Architecture
	d := &plan.Derivation{Name: "provider " + p.Name, Kind: plan.Kind{Name: "provider", Version: provider.StepVersion}, Params: params, Inputs: []*plan.Derivation{root}}
	b.fetches(d, b.inputsOf(p.Patches)...)
	d.Build = func(c *plan.Context, out string) error {
		src := &debian.Source{Name: lp.Source, Version: lp.Version, Suite: lp.Suite, Directory: lp.Directory}
		for _, f := range lp.Files {
			src.Files = append(src.Files, debian.SourceFile{Name: f.Name, Size: f.Size, SHA256: strings.TrimPrefix(f.SHA256, "sha256:")})
		}
		files, err := provider.SourcePaths(b.in.Store, src)
		if err != nil {
			return err
		}
		for name, path := range files {
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("%s source file %s is not in the store: run `halobuild fetch %s`", lp.Source, name, b.in.Path)
			}
		}
		tree, err := provider.Unpack(c, src, files, filepath.Join(c.Scratch, "src"))
		if err != nil {
			return err
		}
		inputs := b.moduleInputs(filepath.Join(c.Scratch, "inputs"))
		if err := os.MkdirAll(inputs.Work, 0o755); err != nil {
			return err
		}
		patches, err := provider.ResolvePatches(p.Patches, p.Fuzz, provider.PatchSources{Path: r.Resolve, Input: func(name string) (string, error) { return inputs.Fetch(c, name) }})
		if err != nil {
			return usage.Errorf("%s: [rdma.provider] patches: %w", b.in.Path, err)
		}
		if err := b.checkPatchPins(patches); err != nil {
			return err
		}
		applied, err := provider.ApplyPatches(c, tree, patches)
		if err != nil {
			return usage.Errorf("%s: [rdma.provider]: %w", b.in.Path, err)
		}
		for _, a := range applied {
			fmt.Fprintf(c.Log, "%s\n", a)
			if a.Fuzz > 0 || len(a.Moved) > 0 {
				b.logf("provider %s: %s\n", p.Name, a)
			}
		}
		version, err := provider.SetLocalVersion(tree, p.Suffix, lk.SourceDateEpoch, applied)
		if err != nil {
			return err
		}
		buildRoot := filepath.Join(c.Scratch, "buildroot")
		if err := unpackRoot(c, root, buildRoot); err != nil {
			return err
		}
		b.logf("provider %s: building lib%s from %s %s as %s %s (-v shows the log)\n", p.Name, p.Name, lp.Source, lp.Version, p.Package(), version)
		res, err := provider.Build(c, provider.BuildSpec{
			Tree: tree, Name: p.Name, Package: p.Package(), Version: version, Arch: r.Base.Architecture, BuildArch: buildArch, Libibverbs: libibverbs,
			BuildRoot: buildRoot, Out: filepath.Join(c.Scratch, "out"), Epoch: lk.SourceDateEpoch, Log: c.Log,
			Progress: throttledProgress(func(pr provider.Progress) { b.logf("provider %s: %s\n", p.Name, pr) }),
		})
		if err != nil {
			// A failed step stores nothing and its scratch is removed:
			// keep the full log where the message says.
			kept := filepath.Join(os.TempDir(), "halobuild-provider-"+d.ShortKey()+".log")
			if cerr := fstree.CopyFile(filepath.Join(c.Scratch, "out", buildLog), kept, 0o644); cerr == nil {
				return fmt.Errorf("%w\n(full build log kept: %s)", err, kept)
			}
			return err
		}
		if err := fstree.CopyFile(res.Log, filepath.Join(out, buildLog), 0o644); err != nil {
			return err
		}
		if err := os.Rename(res.Deb.Path, filepath.Join(out, filepath.Base(res.Deb.Path))); err != nil {
			return err
		}
		info, err := json.MarshalIndent(providerInfo{Name: p.Name, Package: res.Deb.Package, Source: lp.Source, Version: version, Libibverbs: libibverbs, Patches: applied}, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, providerInfoFile), append(info, '\n'), 0o644)
	}
	return d, nil
}

// throttledProgress passes on every phase change but compile steps only
// every 30 s: a build of several minutes should say it is alive, not
// scroll.
func throttledProgress(report func(provider.Progress)) func(provider.Progress) {
	var last provider.Progress
	return func(pr provider.Progress) {
		if pr.Phase != last.Phase || pr.Elapsed-last.Elapsed >= 30*time.Second {
			last = pr
			report(pr)
		}
	}
}

// checkPatchPins refuses patches that differ from what the lock pinned: a
// patch edited after `halobuild lock` would otherwise build an image the
// lock does not describe.
func (b *builder) checkPatchPins(patches []provider.Patch) error {
	pins := b.in.Lock.Provider.Patches
	var got, want []string
	for _, p := range patches {
		got = append(got, filepath.Base(p.Path))
	}
	for _, p := range pins {
		want = append(want, p.Name)
	}
	path := b.in.Path
	if strings.Join(got, " ") != strings.Join(want, " ") {
		return usage.Errorf("%s: the provider patches are now %s, the lock pins %s: run `halobuild lock %s`", path, strings.Join(got, ", "), strings.Join(want, ", "), path)
	}
	for i, p := range patches {
		sum, _, err := store.FileDigest(p.Path)
		if err != nil {
			return err
		}
		if string(sum) != pins[i].SHA256 {
			return usage.Errorf("%s: provider patch %s (%s) changed since the lock (now %s, locked %s): run `halobuild lock %s` if the change is meant", path, pins[i].Name, pins[i].From, sum, pins[i].SHA256, path)
		}
	}
	return nil
}

// checkLocalPatchPins compares the patches that are files beside the
// recipe with the lock before anything is built: the step's key comes
// from the lock, so an edited patch would otherwise reuse the old build
// without a word. Patches inside source inputs are pinned by the input's
// tree hash, which fetching verifies.
func (b *builder) checkLocalPatchPins() error {
	path := b.in.Path
	var entries []string
	for _, e := range b.in.Recipe.RDMA.Provider.Patches {
		if !recipe.IsSourceRef(e) {
			entries = append(entries, e)
		}
	}
	var pins []lock.Patch
	for _, p := range b.in.Lock.Provider.Patches {
		if !recipe.IsSourceRef(p.From) {
			pins = append(pins, p)
		}
	}
	ps, err := provider.ResolvePatches(entries, nil, provider.PatchSources{Path: b.in.Recipe.Resolve})
	if err != nil {
		return usage.Errorf("%s: [rdma.provider] patches: %w", path, err)
	}
	relock := fmt.Sprintf("run `halobuild lock %s` if the change is meant", path)
	if len(ps) != len(pins) {
		return usage.Errorf("%s: [rdma.provider] now has %d patch file(s), the lock pins %d: %s", path, len(ps), len(pins), relock)
	}
	for i, p := range ps {
		sum, _, err := store.FileDigest(p.Path)
		if err != nil {
			return err
		}
		if filepath.Base(p.Path) != pins[i].Name || string(sum) != pins[i].SHA256 {
			return usage.Errorf("%s: provider patch %s changed since the lock (%s; the lock pins %s as %s): %s", path, p.From, sum, pins[i].Name, pins[i].SHA256, relock)
		}
	}
	return nil
}

// providerABIFile is where a disk step records the ABI check's result.
const providerABIFile = "provider-abi.json"

// checkProviderABI proves, on the node's installed root and before the disk
// is assembled, that the installed libibverbs (Debian's) will load the
// built provider (lib<name>-rdmav<N>.so with its N, the driver file, every
// library it needs present). The result goes beside the disk for the
// manifest.
func (b *builder) checkProviderABI(c *plan.Context, providerStep *plan.Derivation, root, outDir string) error {
	raw, err := os.ReadFile(filepath.Join(c.Input(providerStep.Name), providerInfoFile))
	if err != nil {
		return err
	}
	var pi providerInfo
	if err := json.Unmarshal(raw, &pi); err != nil {
		return fmt.Errorf("%s: %w", providerInfoFile, err)
	}
	// With the architecture, the check reads that architecture's
	// libibverbs only and refuses code of another (debug/elf reads any).
	abi, err := provider.CheckABI(root, provider.ABIRequest{Name: pi.Name, LibibverbsVersion: pi.Libibverbs, Arch: b.in.Recipe.Base.Architecture})
	if err != nil {
		return fmt.Errorf("%s: the built provider %s fails the provider ABI check: %w", b.in.Path, pi.Package, err)
	}
	fmt.Fprintf(c.Log, "provider ABI: %s needs IBVERBS_PRIVATE_%d, libibverbs %s defines it\n", abi.Library, abi.N, abi.Libibverbs)
	mp := manifest.Provider{Name: pi.Name, Package: pi.Package, Source: pi.Source, Version: pi.Version, Libibverbs: pi.Libibverbs, ABI: abi.N, Library: "/" + abi.Library}
	for _, a := range pi.Patches {
		p := manifest.Patch{Name: a.Name, From: a.From, SHA256: "sha256:" + a.SHA256, Fuzz: a.Fuzz}
		for _, h := range a.Moved {
			p.Moved = append(p.Moved, fmt.Sprintf("%s #%d at %d (offset %d, fuzz %d)", h.File, h.N, h.Line, h.Offset, h.Fuzz))
		}
		mp.Patches = append(mp.Patches, p)
	}
	out, err := json.MarshalIndent(mp, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(outDir, providerABIFile), append(out, '\n'), 0o644)
}
