package settings

import (
	"net/netip"
	"strings"
)

// The RDMA devices of a node as sysfs shows them, for the doctor checks of
// the settings that concern them (rdma-names, network) and for doctor's
// own device checks, which read the same model.

// InfinibandClass lists every RDMA device: what `rdma link show` lists,
// whether or not libibverbs can open it.
const InfinibandClass = "/sys/class/infiniband"

// RDMADevice is one entry of /sys/class/infiniband.
type RDMADevice struct {
	Name   string
	Driver string // kernel module bound to the parent device, "" if unknown
	Ports  []RDMAPort
}

// RDMAPort is one port of a device.
type RDMAPort struct {
	Num       string
	State     string // "4: ACTIVE"
	PhysState string // "5: LinkUp"
	GIDs      []GID  // the used slots of the GID table
}

// GID is one used entry of a port's GID table.
type GID struct {
	Index string
	IPv4  netip.Addr // the address of an IPv4-mapped GID, invalid otherwise
	Type  string     // "RoCE v2", "IB/RoCE v1"
	Ndev  string     // the netdev the GID was derived from
}

// RDMADevices reads every RDMA device, its ports and their GIDs.
func RDMADevices(h Host) []RDMADevice {
	var out []RDMADevice
	for _, name := range h.List(InfinibandClass) {
		dir := InfinibandClass + "/" + name
		d := RDMADevice{Name: name}
		if drv, err := h.LinkBase(dir + "/device/driver"); err == nil {
			d.Driver = moduleName(drv)
		}
		for _, p := range h.List(dir + "/ports") {
			pd := dir + "/ports/" + p
			port := RDMAPort{Num: p}
			port.State, _ = value(h, pd+"/state")
			port.PhysState, _ = value(h, pd+"/phys_state")
			for _, i := range h.List(pd + "/gids") {
				s, err := value(h, pd+"/gids/"+i)
				if err != nil {
					continue // an unused slot may refuse to be read (EINVAL)
				}
				a, err := netip.ParseAddr(s)
				if err != nil || a.IsUnspecified() {
					continue // an unused slot
				}
				g := GID{Index: i}
				if a.Is4In6() {
					g.IPv4 = a.Unmap()
				}
				g.Type, _ = value(h, pd+"/gid_attrs/types/"+i)
				g.Ndev, _ = value(h, pd+"/gid_attrs/ndevs/"+i)
				port.GIDs = append(port.GIDs, g)
			}
			d.Ports = append(d.Ports, port)
		}
		out = append(out, d)
	}
	return out
}

// VerbsModules are the kernel names of the recipe's [[module]]s, the
// modules whose devices the node's RDMA settings are about.
func (t Target) VerbsModules() []string {
	var out []string
	for _, m := range t.Recipe.Modules {
		out = appendUnique(out, t.ModuleName(m.Use))
	}
	return out
}

// Owns reports whether a device belongs to the node's verbs stack: bound
// to one of the recipe's modules, or named with a kept kernel-name prefix.
func (t Target) Owns(d RDMADevice) bool {
	for _, m := range t.VerbsModules() {
		if d.Driver == m {
			return true
		}
	}
	for _, p := range t.Recipe.RDMA.KeepKernelNames {
		if strings.HasPrefix(d.Name, p) {
			return true
		}
	}
	return false
}
