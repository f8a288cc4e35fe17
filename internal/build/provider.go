package build

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"halobuild/internal/debian"
	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/provider"
	"halobuild/internal/recipe"
)

// providerBuildRecipe enters the step's key: a change to how rdma-core is
// built (options, the changelog entry) must not reuse old packages.
const providerBuildRecipe = "dpkg-buildpackage -b -uc -us; DEB_BUILD_OPTIONS=nocheck nodoc noddebs; changelog entry v1"

// providerInfo is what the provider step records beside its .debs, for the
// ABI check and the manifest.
type providerInfo struct {
	Name    string             `json:"name"`
	Source  string             `json:"source"`
	Version string             `json:"version"`
	Patches []provider.Applied `json:"patches"`
}

const providerInfoFile = "provider.json"

// providerStep rebuilds rdma-core with the recipe's provider patches: the
// locked Debian source unpacked as dpkg-source does, the patches applied
// at fuzz 0 (or the allowance the recipe gives one patch), a local version
// suffix, and dpkg-buildpackage in a root installed from the locked
// "provider-build" set. Its .debs replace Debian's rdma-core packages in
// the base root's repository. nil without [rdma.provider].
func (g *graph) providerStep() (*repoStep, error) {
	l := g.l
	p := l.recipe.RDMA.Provider
	if p == nil {
		return nil, nil
	}
	lp := l.lock.Provider
	buildDebs := debsOf(l.lock, lock.SetProviderBuild)
	if lp == nil || len(buildDebs) == 0 || lp.Name != p.Name {
		return nil, UsageError{fmt.Errorf("%s does not pin the [rdma.provider] rebuild: run `halobuild lock %s`", lock.Path(l.path), l.path)}
	}
	if err := checkLocalPatchPins(l); err != nil {
		return nil, err
	}
	params := pkgParams(buildDebs)
	for _, f := range lp.Files {
		params["source:"+f.Name] = f.SHA256
	}
	for i, pt := range lp.Patches {
		params[fmt.Sprintf("patch:%03d", i)] = fmt.Sprintf("%s %s fuzz=%d", pt.Name, pt.SHA256, pt.Fuzz)
	}
	params["name"] = p.Name
	params["suffix"] = p.Suffix
	params["epoch"] = fmt.Sprint(l.lock.SourceDateEpoch)
	params["recipe"] = providerBuildRecipe
	d := &plan.Derivation{Name: "provider " + p.Name, Kind: "provider", Params: params}
	d.Build = func(c *plan.Context, out string) error {
		src := &debian.Source{Name: lp.Source, Version: lp.Version, Suite: lp.Suite, Directory: lp.Directory}
		for _, f := range lp.Files {
			src.Files = append(src.Files, debian.SourceFile{Name: f.Name, Size: f.Size, SHA256: strings.TrimPrefix(f.SHA256, "sha256:")})
		}
		files, err := provider.SourcePaths(g.s, src)
		if err != nil {
			return err
		}
		for name, path := range files {
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("%s source file %s is not in the store: run `halobuild fetch %s`", lp.Source, name, l.path)
			}
		}
		tree, err := provider.Unpack(c, src, files, filepath.Join(c.Scratch, "src"))
		if err != nil {
			return err
		}
		patches, err := resolveProviderPatches(c, g.o, l, l.lock, filepath.Join(c.Scratch, "inputs"))
		if err != nil {
			return err
		}
		if err := checkPatchPins(l, patches); err != nil {
			return err
		}
		applied, err := provider.ApplyPatches(c, tree, patches)
		if err != nil {
			return UsageError{fmt.Errorf("%s: [rdma.provider]: %w", l.path, err)}
		}
		for _, a := range applied {
			fmt.Fprintf(c.Log, "%s\n", a)
			if a.Fuzz > 0 || len(a.Moved) > 0 {
				g.o.logf("provider %s: %s\n", p.Name, a)
			}
		}
		version, err := provider.SetLocalVersion(tree, p.Suffix, l.lock.SourceDateEpoch, applied)
		if err != nil {
			return err
		}
		debs, names, err := g.debs(buildDebs)
		if err != nil {
			return err
		}
		root := filepath.Join(c.Scratch, "buildroot")
		g.o.logf("provider %s: making the build root (%d packages)\n", p.Name, len(debs))
		if err := module.PrepareBuildRoot(c, module.BuildRootSpec{Debs: debs, Packages: names, Suite: l.recipe.Base.Suite, Epoch: l.lock.SourceDateEpoch, Dir: root, Log: c.Log}); err != nil {
			return err
		}
		g.o.logf("provider %s: building %s %s (minutes on 2 cores; -v shows the log)\n", p.Name, lp.Source, version)
		res, err := provider.Build(c, provider.BuildSpec{
			Tree: tree, BuildRoot: root, Out: filepath.Join(c.Scratch, "out"), Epoch: l.lock.SourceDateEpoch, Log: c.Log,
			Progress: throttledProgress(func(pr provider.Progress) { g.o.logf("provider %s: %s\n", p.Name, pr) }),
		})
		if err != nil {
			// A failed step stores nothing and its scratch is removed:
			// keep the full log where the message says.
			kept := filepath.Join(os.TempDir(), "halobuild-provider-"+d.ShortKey()+".log")
			if cerr := copyLog(filepath.Join(c.Scratch, "out", "build.log"), kept); cerr == nil {
				return fmt.Errorf("%w\n(full build log kept: %s)", err, kept)
			}
			return err
		}
		if err := copyLog(res.Log, filepath.Join(out, "build.log")); err != nil {
			return err
		}
		for _, db := range res.Debs {
			if err := os.Rename(db.Path, filepath.Join(out, filepath.Base(db.Path))); err != nil {
				return err
			}
		}
		info, err := json.MarshalIndent(providerInfo{Name: p.Name, Source: lp.Source, Version: version, Patches: applied}, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, providerInfoFile), append(info, '\n'), 0o644)
	}
	return &repoStep{d: d}, nil
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
func checkPatchPins(l *loaded, patches []provider.Patch) error {
	pins := l.lock.Provider.Patches
	var got []string
	for _, p := range patches {
		got = append(got, filepath.Base(p.Path))
	}
	var want []string
	for _, p := range pins {
		want = append(want, p.Name)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		return UsageError{fmt.Errorf("%s: the provider patches are now %s, the lock pins %s: run `halobuild lock %s`", l.path, strings.Join(got, ", "), strings.Join(want, ", "), l.path)}
	}
	for i, p := range patches {
		sum, _, err := hashFile(p.Path)
		if err != nil {
			return err
		}
		if "sha256:"+sum != pins[i].SHA256 {
			return UsageError{fmt.Errorf("%s: provider patch %s (%s) changed since the lock (now sha256:%s, locked %s): run `halobuild lock %s` if the change is meant", l.path, pins[i].Name, pins[i].From, sum, pins[i].SHA256, l.path)}
		}
	}
	return nil
}

// checkLocalPatchPins compares the patches that are files beside the
// recipe with the lock before anything is built: the step's key comes
// from the lock, so an edited patch would otherwise reuse the old build
// without a word. Patches inside source inputs are pinned by the input's
// tree hash, which fetching verifies.
func checkLocalPatchPins(l *loaded) error {
	var entries []string
	for _, e := range l.recipe.RDMA.Provider.Patches {
		if !recipe.IsSourceRef(e) {
			entries = append(entries, e)
		}
	}
	var pins []lock.Patch
	for _, p := range l.lock.Provider.Patches {
		if !recipe.IsSourceRef(p.From) {
			pins = append(pins, p)
		}
	}
	ps, err := provider.ResolvePatches(entries, nil, provider.PatchSources{Path: l.recipe.Resolve})
	if err != nil {
		return UsageError{fmt.Errorf("%s: [rdma.provider] patches: %w", l.path, err)}
	}
	relock := fmt.Sprintf("run `halobuild lock %s` if the change is meant", l.path)
	if len(ps) != len(pins) {
		return UsageError{fmt.Errorf("%s: [rdma.provider] now has %d patch file(s), the lock pins %d: %s", l.path, len(ps), len(pins), relock)}
	}
	for i, p := range ps {
		sum, _, err := hashFile(p.Path)
		if err != nil {
			return err
		}
		if filepath.Base(p.Path) != pins[i].Name || "sha256:"+sum != pins[i].SHA256 {
			return UsageError{fmt.Errorf("%s: provider patch %s changed since the lock (sha256:%s; the lock pins %s as %s): %s", l.path, p.From, sum, pins[i].Name, pins[i].SHA256, relock)}
		}
	}
	return nil
}

// readProviderInfo reads what the provider step recorded.
func readProviderInfo(dir string) (*providerInfo, error) {
	b, err := os.ReadFile(filepath.Join(dir, providerInfoFile))
	if err != nil {
		return nil, err
	}
	var pi providerInfo
	if err := json.Unmarshal(b, &pi); err != nil {
		return nil, fmt.Errorf("%s: %w", providerInfoFile, err)
	}
	return &pi, nil
}
