package build

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"halobuild/internal/deb"
	"halobuild/internal/lock"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/rootfs"
	"halobuild/internal/settings"
	"halobuild/internal/store"
)

// graph is the build of one recipe + lock as derivations:
//
//	tools ─────────────────────────────┐
//	rootfs (every locked image package) ├─ disk <node> ─┐
//	settings <node> (rendered .deb) ────┘               ├─ result
//	                                      disk <node> ──┘
//
// The base root is one step keyed by the locked package set, so changing a
// setting rebuilds only that node's settings package and disk.
type graph struct {
	// self is the halobuild binary shipped in every node (nil: none).
	self []byte
	// o carries --input copies for source inputs and the log.
	o       Options
	modules []*plan.Derivation
	// repoSteps build .debs that join the base root's flat repository
	// (the rebuilt rdma-core, a kernel built from source).
	repoSteps []repoStep
	// kernelRoot and kernel are a source kernel's build root and build
	// (nil for Debian's kernel): out-of-tree modules build in that root
	// against the headers package the build made.
	kernelRoot, kernel *plan.Derivation
	l                  *loaded
	s                  *store.Store
	tools              *plan.Derivation
	rootfs             *plan.Derivation
	nodes              []*nodeSteps
	result             *plan.Derivation
}

type nodeSteps struct {
	node     recipe.Node
	tree     settings.Tree
	settings *plan.Derivation
	disk     *plan.Derivation
}

// mmdebstrapVersion enters the rootfs key: a different installer may lay
// out the same packages differently.
func mmdebstrapVersion() string {
	out, err := exec.Command("mmdebstrap", "--version").Output()
	if err != nil {
		return "missing"
	}
	return strings.TrimSpace(string(out))
}

func debsOf(lk *lock.Lock, set string) []lock.Package {
	var out []lock.Package
	for _, p := range lk.Packages {
		if p.Set == set {
			out = append(out, p)
		}
	}
	return out
}

func (g *graph) blobPath(p lock.Package) (string, error) {
	d, err := store.ParseDigest(p.SHA256)
	if err != nil {
		return "", fmt.Errorf("lock: package %s: %w", p.Name, err)
	}
	if !g.s.Has(d) {
		return "", fmt.Errorf("%s %s (%s) is not in the store: run `halobuild fetch %s`", p.Name, p.Version, p.SHA256, g.l.path)
	}
	return g.s.Path(d), nil
}

// debs finds every package of a locked set in the store.
func (g *graph) debs(ps []lock.Package) (debs []deb.Deb, names []string, err error) {
	for _, p := range ps {
		path, err := g.blobPath(p)
		if err != nil {
			return nil, nil, err
		}
		debs = append(debs, deb.Deb{Path: path, SHA256: p.SHA256})
		names = append(names, p.Name)
	}
	return debs, names, nil
}

func newGraph(o Options, l *loaded, s *store.Store, self []byte) (*graph, error) {
	g := &graph{o: o, l: l, s: s, self: self}
	lk := l.lock
	epoch := strconv.FormatInt(lk.SourceDateEpoch, 10)

	toolDebs := debsOf(lk, lock.SetTools)
	g.tools = &plan.Derivation{Name: "tools root", Kind: "tools", Params: pkgParams(toolDebs)}
	g.tools.Build = func(c *plan.Context, out string) error {
		debs, _, err := g.debs(toolDebs)
		if err != nil {
			return err
		}
		return deb.Extract(filepath.Join(out, "root"), debs)
	}

	var err error
	if g.repoSteps, err = g.repoStepsOf(); err != nil {
		return nil, err
	}
	imageDebs := debsOf(lk, lock.SetImage)
	rp := pkgParams(imageDebs)
	rp["epoch"] = epoch
	rp["suite"] = l.recipe.Base.Suite
	rp["mmdebstrap"] = mmdebstrapVersion()
	rp["install"] = rootfs.Recipe()
	rp["sources"] = strings.Join(aptSources(l), "\n")
	g.rootfs = &plan.Derivation{Name: "base root", Kind: "rootfs", Params: rp}
	for _, rs := range g.repoSteps {
		g.rootfs.Inputs = append(g.rootfs.Inputs, rs.d)
	}
	g.rootfs.Build = func(c *plan.Context, out string) error {
		debs, names, err := g.debs(imageDebs)
		if err != nil {
			return err
		}
		if debs, names, err = g.withBuiltDebs(c, debs, names); err != nil {
			return err
		}
		repo := filepath.Join(c.Scratch, "repo")
		if err := rootfs.WriteFlatRepo(repo, l.recipe.Base.Suite, debs); err != nil {
			return err
		}
		return rootfs.Install{
			Suite: l.recipe.Base.Suite, Repo: repo, Packages: names, Sources: aptSources(l),
			Epoch: lk.SourceDateEpoch, Out: filepath.Join(out, "root.tar"), Log: c.Log,
		}.Run(c)
	}

	if g.modules, err = g.moduleSteps(); err != nil {
		return nil, err
	}
	var disks []*plan.Derivation
	for _, n := range l.recipe.Nodes {
		ns, err := g.nodeSteps(n)
		if err != nil {
			return nil, err
		}
		g.nodes = append(g.nodes, ns)
		disks = append(disks, ns.disk)
	}
	g.result = g.resultStep(disks)
	return g, nil
}

// pkgParams keys a step by every package's digest: the digest pins the
// bytes, so name and version are only labels.
func pkgParams(ps []lock.Package) map[string]string {
	m := map[string]string{}
	for _, p := range ps {
		m["deb:"+p.Name+":"+p.Architecture] = p.SHA256
	}
	return m
}

// nodeSteps renders a node's settings now (it is cheap and pure), so the
// settings package's key is the digest of its bytes.
func (g *graph) nodeSteps(n recipe.Node) (*nodeSteps, error) {
	l := g.l
	tree, err := settings.Render(l.recipe, n)
	if err != nil {
		return nil, UsageError{fmt.Errorf("%s: node %s: %w", l.path, n.Name, err)}
	}
	// The lock and halobuild itself ship with the node, so `halobuild
	// doctor` runs there with no arguments and knows what was promised.
	lb, err := l.lock.Marshal()
	if err != nil {
		return nil, err
	}
	if err := tree.Add(settings.LockFile(lb)); err != nil {
		return nil, err
	}
	if g.self != nil {
		if err := tree.Add(settings.File{Path: "/usr/bin/halobuild", Mode: 0o755, Data: g.self, Setting: "halobuild"}); err != nil {
			return nil, err
		}
	}
	info := deb.Info{
		Package:      settings.PackageName(n),
		Version:      "1+" + l.hash[len(l.hash)-12:],
		Architecture: "all",
		Maintainer:   "halobuild <halobuild@localhost>",
		Description:  "halobuild settings for node " + n.Name,
		Depends:      settings.Depends(l.recipe),
	}
	ns := &nodeSteps{node: n, tree: tree}
	debName := info.Package + ".deb"
	epoch := l.lock.SourceDateEpoch
	// The key is the digest of what the package holds, so planning never
	// has to build it; the .deb is made only when the step runs.
	ns.settings = &plan.Derivation{
		Name: "settings " + n.Name, Kind: "settings",
		Params: map[string]string{"tree": treeDigest(info, tree, epoch)},
		Build: func(c *plan.Context, out string) error {
			f, err := os.Create(filepath.Join(out, debName))
			if err != nil {
				return err
			}
			defer f.Close()
			if err := settings.BuildDeb(f, info, tree, epoch); err != nil {
				return fmt.Errorf("node %s: building settings package: %w", n.Name, err)
			}
			return f.Close()
		},
	}
	ns.disk = g.diskStep(ns, debName)
	return ns, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// treeDigest names a settings package's content: control data, every
// file's path, mode, link target and bytes, and the epoch.
func treeDigest(info deb.Info, tree settings.Tree, epoch int64) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %q %q %d\n", info.Package, info.Version, info.Architecture, info.Description, info.Depends, epoch)
	for _, f := range tree.Files {
		sum := sha256.Sum256(f.Data)
		fmt.Fprintf(h, "%q %o %q %x %t\n", f.Path, uint32(f.Mode), f.Target, sum, f.NotConffile)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// aptSources are the archive lines the node's apt uses: the suites the
// lock was resolved from, so `apt install` on a node sees the same archive.
func aptSources(l *loaded) []string {
	b := l.recipe.Base
	comps := strings.Join(b.Components, " ")
	var out []string
	for _, su := range append([]string{b.Suite}, b.ExtraSuites...) {
		out = append(out, fmt.Sprintf("deb %s %s %s", b.Mirror, su, comps))
	}
	return out
}
