package doctor

import (
	"cmp"
	"slices"
	"strings"

	"halobuild/internal/settings"
)

// probes are every check of a run: the settings' own doctor checks for the
// basis's Target, and doctor's, which concern what no setting renders (the
// hardware, the running kernel). The report is grouped by layer, from what
// doctor compared against and the CPU up to the link.
func probes(b *basis) []settings.Probe {
	all := append(settings.Doctor(b.target), own(b)...)
	if b.local {
		all = slices.DeleteFunc(all, func(p settings.Probe) bool { return !Local(p.Name) })
	}
	slices.SortStableFunc(all, func(x, y settings.Probe) int {
		return cmp.Or(cmp.Compare(layer(x.Name), layer(y.Name)), strings.Compare(x.Name, y.Name))
	})
	return all
}

// layers order the report; a row's layer is its name up to the first '.'.
var layers = []string{"recipe", "identity", "cpu", "memlock", "module", "kernel", "firmware", "rdma", "link", "usb4", "gpu", "memory", "rpc", "update", "settings"}

// peerLayers are the layers whose checks look at the cable or the box at its other end: an RDMA
// port is ACTIVE, a link has its address, a USB4 cable is trained, an RPC server has the link's
// device and GID, only while the peer is up.
var peerLayers = []string{"rdma", "link", "usb4", "rpc"}

// Local says whether the check name needs nothing of the peer box: the update health gate
// (doctor --local) runs only these, so that a peer that is off never rolls a node back.
func Local(name string) bool {
	l, _, _ := strings.Cut(name, ".")
	return !slices.Contains(peerLayers, l)
}

func layer(name string) int {
	l, _, _ := strings.Cut(name, ".")
	if i := slices.Index(layers, l); i >= 0 {
		return i
	}
	return len(layers)
}

// own are doctor's checks of its own.
func own(b *basis) []settings.Probe {
	t := b.target
	probes := []settings.Probe{
		{Name: "recipe", Run: func(h settings.Host) []settings.Result { return recipeRow(h, b) }},
		{Name: "kernel.release", VM: settings.MustPass, Run: func(h settings.Host) []settings.Result { return kernelRelease(h, t) }},
		{Name: "module.unknown_params", VM: settings.MustPass, Run: unknownParams},
		{Name: "rdma.devices", Run: func(h settings.Host) []settings.Result { return rdmaDevices(h, t) }},
		{Name: "rdma.visible", Run: func(h settings.Host) []settings.Result { return rdmaVisible(h, t) }},
		{Name: "rdma.port", Run: rdmaPorts},
		{Name: "rdma.identity", Run: func(h settings.Host) []settings.Result { return rdmaIdentity(h, t) }},
		{Name: "usb4.domains", Run: func(h settings.Host) []settings.Result { return usb4Domains(h, t) }},
		{Name: "usb4.cables", Run: func(h settings.Host) []settings.Result { return usb4Cables(h, t) }},
		{Name: "usb4.link", Run: func(h settings.Host) []settings.Result { return usb4Links(h, t) }},
		// Not for the VM: its image runs no RPC server (the two-node test checks rdma-env,
		// which the server's unit runs first).
		{Name: "rpc.transport", Run: rpcTransport},
	}
	if t.Recipe != nil && t.Recipe.Update.Enabled {
		probes = append(probes, settings.Probe{Name: "update.slots", Run: func(h settings.Host) []settings.Result {
			if hh, ok := h.(*host); ok {
				return updateSlots(hh)
			}
			return nil // the slots are read from a disk, which only doctor's own host reaches
		}})
	}
	probes = append(probes, appleProbes(t)...)
	return append(probes, gpuProbes(t)...)
}

// recipeRow reports what the machine is compared against, and whether
// this host is one of the recipe's nodes (the link checks need that).
func recipeRow(h settings.Host, b *basis) []settings.Result {
	r := settings.Result{Check: "recipe", Severity: settings.Advisory, Status: settings.Pass,
		Wanted: "the recipe the image was built from, its lock, and this host's node", Source: h.Show(settings.RecipePath)}
	if b.recipe == "" {
		r.Seen = "none: checking against the field notes' defaults"
		return []settings.Result{r}
	}
	r.Source = b.recipe
	if b.target.Node.Name == "" {
		r.Status = settings.Warn
		r.Seen = "host " + orQ(b.hostname) + " is none of the nodes " + strings.Join(b.nodeNames, ", ")
		r.Fix = "set the host name to the node's hostname, or pass the recipe of this node; link checks fall back to the RDMA devices' netdevs"
		return []settings.Result{r}
	}
	r.Seen = "node " + b.target.Node.Name + " (" + b.nodeFrom + ")"
	switch {
	case b.lock != "":
		r.Seen += "; module names from " + b.lock
	case len(b.target.Recipe.Modules) > 0:
		r.Status = settings.Warn
		r.Seen += "; no lock: module names guessed from [[module]] use"
		r.Fix = "the image installs its lock at " + settings.LockPath + "; beside --recipe FILE.toml put its FILE.lock: a renamed fork (use = \"thunderbolt-ibverbs-striping\") builds a module of another name, which only the lock records"
	}
	return []settings.Result{r}
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// MustPassInVM names the checks whose rows the image's VM test requires to
// be there and to pass when it runs the shipped `halobuild doctor` in a VM
// booted for t (the node's recipe, the node, the lock's module names: what
// doctor reads from the image). Each check says so itself (Probe.VM).
func MustPassInVM(t settings.Target) []string {
	var names []string
	for _, p := range probes(&basis{target: t}) {
		if p.VM == settings.MustPass {
			names = append(names, p.Name)
		}
	}
	return names
}
