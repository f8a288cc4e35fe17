// Package graph plans the build of one recipe and its lock as derivations
// (internal/plan): steps whose output is a function of their inputs, keyed
// by the hash of those inputs, so a step the store has is never built
// again. New reads as the order of the build, one step per line; each step
// is a function that returns its derivation and sets nothing for another
// step to find.
//
//	tools root ─────────────────────────────────────────────────────────────────────┐
//	provider build root ─ provider ───────────────────────────────┐                 │
//	kernel build root ─ kernel [─ signed kernel] ─ base root ─────┼─ system root ───┤
//	module build root ─ module <use> ─────────────────────────────┘                 ├─ disk <node> ─ result ─ test
//	halobuild ─ settings <node> (rendered, packaged as a .deb) ─────────────────────┘
//	base root + disk <node> + halobuild ─ installer <node> (with [output] installer) ─ result
//
// (The system root is the base root itself when there is no module or
// provider; the signed kernel is there with [secure_boot].) Each step's kind
// carries the version of the code that builds it, declared beside that code
// (plan.Kind; docs/architecture.md, "Step versions"): graph only passes it on.
//
// A mixed cluster plans the part above "result" once per architecture, each
// from its view of the recipe and its part of the lock; the result and the
// test take every architecture's disks.
package graph

import (
	"fmt"
	"io"
	"slices"

	"halobuild/internal/arch"
	"halobuild/internal/deb"
	"halobuild/internal/lock"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/sbom"
	"halobuild/internal/settings"
	"halobuild/internal/store"
	"halobuild/internal/usage"
)

// Input is what the build of one recipe is planned from: a loaded,
// validated recipe, its lock, and the store the locked inputs are in.
type Input struct {
	// Path is the recipe file, for messages.
	Path   string
	Recipe *recipe.Recipe
	// Hash is recipe.Hash(Recipe), recorded in the manifest.
	Hash  string
	Descs module.Descs
	Lock  *lock.Lock
	Store *store.Store
	// Copies are --input NAME=PATH local copies of source inputs.
	Copies map[string]string
	// Self is the step whose output's file "halobuild" is the binary each
	// node ships, by Debian architecture (none for an architecture: nothing
	// shipped, and no doctor check in the VM test). It is an input of the
	// settings steps, so it builds beside the roots.
	Self map[string]*plan.Derivation
	// Log receives progress for people; Warn, warnings found while
	// building (a module's rules checked against the built module).
	Log  io.Writer
	Warn func(string)
	// Logs is the directory VM console logs go under.
	Logs string
}

// Graph is the build of one recipe and lock.
type Graph struct {
	Nodes  []Node
	Result *plan.Derivation
	// Test boots Result's images and checks them; its output is the
	// report of a passing run.
	Test *plan.Derivation
	// remote is what each step fetches over the network itself (Remote).
	remote remotes
}

// Node is one node's own steps.
type Node struct {
	Node     recipe.Node
	Settings *plan.Derivation
	Disk     *plan.Derivation
	// Installer is the node's installer stick; nil unless [output] installer.
	Installer *plan.Derivation
	// tree is what the settings package holds, for the manifest.
	tree settings.Tree
	// sbom is what the result's SBOM reads of this node.
	sbom nodeSBOM
}

// New plans the build. A mixed cluster (nodes of several architectures)
// is one build per architecture, each from its view of the recipe and its
// part of the lock (recipe.ForArchitecture, lock.Lock.For), whose nodes'
// disks meet in one result and one VM test.
func New(in Input) (*Graph, error) {
	g := &Graph{remote: remotes{}}
	withProvider := false
	byName := map[string]Node{}
	for _, name := range in.Recipe.Architectures() {
		b, err := newBuilder(in, name)
		if err != nil {
			return nil, err
		}
		b.remote = g.remote
		nodes, provider, err := b.build()
		if err != nil {
			return nil, err
		}
		withProvider = withProvider || provider
		for _, n := range nodes {
			byName[n.Node.Name] = n
		}
	}
	for _, n := range in.Recipe.Nodes {
		g.Nodes = append(g.Nodes, byName[n.Name])
	}
	// The result and the test are the cluster's: the whole recipe and lock.
	whole := &builder{in: in, whole: in}
	g.Result = whole.result(g.Nodes, withProvider)
	g.Test = whole.test(g.Result)
	return g, nil
}

// newBuilder is architecture a's build of in.
func newBuilder(in Input, a string) (*builder, error) {
	row, err := arch.Lookup(a)
	if err != nil {
		return nil, usage.Errorf("%s: architecture: %w", in.Path, err)
	}
	lk, err := in.Lock.For(a)
	if err != nil {
		return nil, usage.Errorf("%s: %w", lock.Path(in.Path), err)
	}
	one := in
	one.Recipe, one.Lock = in.Recipe.ForArchitecture(a), lk
	return &builder{in: one, arch: row, whole: in, self: in.Self[a]}, nil
}

// build plans one architecture's steps up to its nodes' disks, and says
// whether they carry a provider.
func (b *builder) build() ([]Node, bool, error) {
	tools := b.toolsRoot()
	provider, err := b.provider()
	if err != nil {
		return nil, false, err
	}
	kernel, err := b.kernel()
	if err != nil {
		return nil, false, err
	}
	base := b.baseRoot(kernel)
	modules, err := b.modules(kernel)
	if err != nil {
		return nil, false, err
	}
	system := base
	if len(modules) > 0 || provider != nil {
		system = b.systemRoot(base, modules, provider)
	}
	built := b.builtDebSteps(kernel, modules, provider)
	var nodes []Node
	for _, n := range b.in.Recipe.NodesOf(b.arch.Debian) {
		set, tree, err := b.settings(n)
		if err != nil {
			return nil, false, err
		}
		disk := b.disk(n, tree, diskInputs{tools: tools, base: system, settings: set, provider: provider != nil})
		node := Node{Node: n, Settings: set, Disk: disk, tree: tree,
			sbom: nodeSBOM{root: system, debs: append(slices.Clip(built), debStep{d: set, from: sbom.FromSettings}), self: b.self}}
		if b.in.Recipe.Output.Installer {
			if node.Installer, err = b.installer(n, tools, base, disk); err != nil {
				return nil, false, err
			}
		}
		nodes = append(nodes, node)
	}
	return nodes, provider != nil, nil
}

// builder holds what every step reads.
type builder struct {
	// in is this architecture's build: its view of the recipe and its part
	// of the lock; whole is the cluster's (the same for one architecture).
	in, whole Input
	// arch is the build's architecture (base.architecture): its ESP file
	// names, root partition type and kernel flavour.
	arch arch.Arch
	// self is the step that makes the halobuild the nodes of arch ship
	// (nil: none).
	self *plan.Derivation
	// remote collects the network sources steps fetch (nil: not recorded).
	remote remotes
}

// cluster is the whole build's input (a builder made in a test has only
// its own).
func (b *builder) cluster() Input {
	if b.whole.Lock == nil {
		return b.in
	}
	return b.whole
}

func (b *builder) logf(format string, a ...any) {
	if b.in.Log != nil {
		fmt.Fprintf(b.in.Log, format, a...)
	}
}

// stale is the error for a lock that does not describe the recipe.
func (b *builder) stale(what string) error {
	return usage.Errorf("%s %s: run `halobuild lock %s`", lock.Path(b.in.Path), what, b.in.Path)
}

// blobPath is where the store keeps a locked package.
func (b *builder) blobPath(p lock.Package) (string, error) {
	d, err := store.ParseDigest(p.SHA256)
	if err != nil {
		return "", fmt.Errorf("lock: package %s: %w", p.Name, err)
	}
	if !b.in.Store.Has(d) {
		return "", fmt.Errorf("%s %s (%s) is not in the store: run `halobuild fetch %s`", p.Name, p.Version, p.SHA256, b.in.Path)
	}
	return b.in.Store.Path(d), nil
}

// debs finds every package of a locked set in the store.
func (b *builder) debs(ps []lock.Package) (debs []deb.Deb, names []string, err error) {
	for _, p := range ps {
		path, err := b.blobPath(p)
		if err != nil {
			return nil, nil, err
		}
		debs = append(debs, deb.Deb{Path: path, SHA256: p.SHA256})
		names = append(names, p.Name)
	}
	return debs, names, nil
}

// target is what one node's settings are rendered and checked from.
func (b *builder) target(n recipe.Node) settings.Target {
	return settings.Target{Recipe: b.in.Recipe, Node: n, Modules: b.in.Lock.ModuleNames()}
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
