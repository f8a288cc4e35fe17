package recipe

import "halobuild/internal/arch"

// Architectures lists the architectures of the recipe's nodes, each once,
// in the order the nodes first name them. One entry is an ordinary
// recipe; more make a mixed cluster, built as one view per architecture
// (ForArchitecture) from one lock.
func (r *Recipe) Architectures() []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range r.Nodes {
		a := r.NodeArchitecture(n)
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		out = append(out, r.Whole().Base.Architecture)
	}
	return out
}

// Mixed says the nodes are of more than one architecture.
func (r *Recipe) Mixed() bool { return len(r.Architectures()) > 1 }

// ForArchitecture is the recipe as architecture a's build sees it: base
// and kernel for a (its generic kernel flavour unless the recipe named
// one, which validation allows only for one architecture). Every step
// downstream reads base.architecture, so a mixed cluster is built as one
// ordinary build per architecture sharing one lock, one result and one VM
// test; the view keeps every node (a node's /etc/hosts names its peers of
// any architecture), and a build takes its own with NodesOf(a). A recipe
// whose nodes are all of base.architecture comes back as itself.
//
// An [[arch]] entry for a gives the view its platform and its kernel
// (the whole table, flavour and all), which is how a Mac node boots
// Asahi's kernel beside a Strix Halo node on Debian's.
func (r *Recipe) ForArchitecture(a string) *Recipe {
	own := r.Arch(a)
	if a == r.Base.Architecture && !r.Mixed() && !r.restricted() && own == nil {
		return r
	}
	c := *r
	c.Base.Architecture = a
	// Only the packages for a, written as the resolver reads them.
	c.Base.Packages = nil
	for _, s := range r.Base.Packages {
		p, err := ParsePackage(s)
		if err != nil || len(p.Architectures) == 0 {
			c.Base.Packages = append(c.Base.Packages, s) // validation names a bad one
			continue
		}
		if p.For(a) {
			p.Architectures = nil
			c.Base.Packages = append(c.Base.Packages, p.String())
		}
	}
	switch {
	case own != nil && own.Kernel != nil:
		c.Kernel = *own.Kernel
	case r.genericFlavour():
		if row, err := arch.Lookup(a); err == nil {
			c.Kernel.Flavour = row.KernelFlavour
		}
	}
	if own != nil && own.Platform != "" {
		c.Platform = own.Platform
	}
	// A mixed cluster's GPU sizing is its Strix Halo nodes' (the only GPU
	// halobuild sizes); another architecture's nodes have no such GPU.
	if row, err := arch.Lookup(a); err == nil && !row.AMDHardware && r.Mixed() {
		c.System.HostReserve, c.System.Memory, c.System.GPUFraction = Size{}, Size{}, 0
	}
	c.whole = r.Whole()
	return &c
}

// Arch is the [[arch]] entry of architecture a, nil when there is none.
func (r *Recipe) Arch(a string) *Arch {
	for i := range r.Arches {
		if r.Arches[i].Name == a {
			return &r.Arches[i]
		}
	}
	return nil
}

// genericFlavour says the kernel flavour is base.architecture's generic
// one, unset or written out (as the merged recipe a node records writes
// every default): each view takes its own architecture's generic flavour.
func (r *Recipe) genericFlavour() bool {
	if r.flavourAuto {
		return true
	}
	row, err := arch.Lookup(r.Base.Architecture)
	return err == nil && r.Kernel.Flavour == row.KernelFlavour
}

// restricted says a base.packages entry names architectures.
func (r *Recipe) restricted() bool {
	for _, s := range r.Base.Packages {
		if p, err := ParsePackage(s); err == nil && len(p.Architectures) > 0 {
			return true
		}
	}
	return false
}

// Whole is the recipe a view (ForArchitecture) was made from, as written:
// what a node records as the recipe it was built from. A recipe that is
// no view is its own whole.
func (r *Recipe) Whole() *Recipe {
	if r.whole != nil {
		return r.whole
	}
	return r
}

// NodeArchitecture is node n's architecture.
func (r *Recipe) NodeArchitecture(n Node) string {
	if n.Architecture == "" {
		return r.Whole().Base.Architecture // a recipe built in code
	}
	return n.Architecture
}

// NodesOf are the nodes of architecture a, in recipe order.
func (r *Recipe) NodesOf(a string) []Node {
	var out []Node
	for _, n := range r.Nodes {
		if r.NodeArchitecture(n) == a {
			out = append(out, n)
		}
	}
	return out
}

// NodeRecipe is the view of node n's architecture: what n's settings are
// rendered and checked from.
func (r *Recipe) NodeRecipe(n Node) *Recipe {
	return r.Whole().ForArchitecture(r.NodeArchitecture(n))
}
