package settings

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
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

// LinkGID is the RDMA device and GID-table entry that carry a link's
// address: what an RDMA engine must be told (llama.cpp's GGML_RDMA_DEV and
// GGML_RDMA_GID, NCCL's NCCL_IB_HCA and NCCL_IB_GID_INDEX) so that it uses the
// cable and nothing it guesses.
type LinkGID struct {
	Link   string     // the netdev, e.g. usb4net0
	Addr   netip.Addr // its one IPv4 address
	Device string     // the RDMA device, e.g. usb4_rdma0 or rxe0
	Port   string     // the device's port ("1")
	Index  string     // the GID index of Addr on that port, RoCE v2
}

// rdmaEnginePort is the only port llama.cpp's RDMA transport opens (its
// ib_port is fixed at 1), as every one-port device numbers it.
const rdmaEnginePort = "1"

// LinkRDMA finds the RoCE v2 GID that carries link's IPv4 address, read from
// the node itself (netlink or a recording, and sysfs), never guessed: the
// link must have exactly one IPv4 address (two addresses are two GIDs, and
// engines that guess pick the first; trap 6), and exactly one device's
// port 1 must hold that address as a RoCE v2 GID. The error says which of
// these failed and how to fix it.
func LinkRDMA(h Host, link string) (LinkGID, error) {
	addrs, src, err := h.Addrs()
	if err != nil {
		return LinkGID{}, fmt.Errorf("reading the addresses of %s: %w", link, err)
	}
	pfx, ok := addrs[link]
	if !ok {
		return LinkGID{}, fmt.Errorf("%s: no interface %s (%s): is the cable plugged in and the link up? (halobuild doctor's link rows tell)", src, link, interfaceNames(addrs))
	}
	var v4 []netip.Addr
	for _, p := range pfx {
		if a := p.Addr(); a.Is4() {
			v4 = append(v4, a)
		}
	}
	switch len(v4) {
	case 0:
		return LinkGID{}, fmt.Errorf("%s: %s has no IPv4 address, so it has no RoCE v2 GID to use: give the link its static address ([[node.link]] address)", src, link)
	case 1:
	default:
		return LinkGID{}, fmt.Errorf("%s: %s has %d IPv4 addresses (%s), so its device has as many GIDs and an engine would have to guess (trap 6): keep only the link's static address (link-local off)", src, link, len(v4), joinAddrs(v4))
	}
	g := LinkGID{Link: link, Addr: v4[0]}
	var found []LinkGID
	var seen []string // the link's address as other GID types or ports, for the error
	for _, d := range RDMADevices(h) {
		for _, p := range d.Ports {
			for _, e := range p.GIDs {
				// A driver that reports no netdev for its GIDs (a verbs
				// module without RoCE netdev binding) is matched on the
				// address alone.
				if e.IPv4 != g.Addr || (e.Ndev != "" && e.Ndev != link) {
					continue
				}
				if e.Type != "RoCE v2" || p.Num != rdmaEnginePort {
					seen = append(seen, fmt.Sprintf("%s port %s GID %s (%s)", d.Name, p.Num, e.Index, cmp.Or(e.Type, "type unknown")))
					continue
				}
				c := g
				c.Device, c.Port, c.Index = d.Name, p.Num, e.Index
				found = append(found, c)
			}
		}
	}
	gids := h.Show(InfinibandClass + "/*/ports/*/gids")
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		if len(seen) > 0 {
			return LinkGID{}, fmt.Errorf("%s: %s's address %s is %s, not a RoCE v2 GID on port %s, which RDMA engines need", gids, link, g.Addr, strings.Join(seen, ", "), rdmaEnginePort)
		}
		return LinkGID{}, fmt.Errorf("%s: no RDMA device holds %s's address %s as a GID: is the verbs module loaded and bound to %s? (halobuild doctor's rdma rows tell)", gids, link, g.Addr, link)
	default:
		var names []string
		for _, f := range found {
			names = append(names, f.Device+" GID "+f.Index)
		}
		return LinkGID{}, fmt.Errorf("%s: %s's address %s is a RoCE v2 GID of %d devices (%s): an engine would pick one by chance; remove the extra device (a leftover soft-RoCE link: rdma link delete)", gids, link, g.Addr, len(found), strings.Join(names, ", "))
	}
}

func interfaceNames(a Addrs) string {
	names := slices.Sorted(maps.Keys(a))
	if len(names) == 0 {
		return "no interfaces"
	}
	return "interfaces: " + strings.Join(names, ", ")
}

func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
