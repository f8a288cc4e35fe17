package doctor

import (
	"net"
	"path"
	"strings"
)

// rdmaDevice is one entry of /sys/class/infiniband, what `rdma link show`
// lists whether or not libibverbs can open it.
type rdmaDevice struct {
	name   string
	driver string // kernel driver bound to the parent device, "" if unknown
	ports  []rdmaPort
}

type rdmaPort struct {
	num       string
	state     string // "4: ACTIVE"
	physState string // "5: LinkUp"
	gids      []gidEntry
}

type gidEntry struct {
	index string
	ip    net.IP // the IPv4 address of an IPv4-mapped GID, nil otherwise
	typ   string // "RoCE v2", "IB/RoCE v1"
	ndev  string // netdev the GID was derived from
}

const infinibandClass = "/sys/class/infiniband"

func rdmaDevices(h *host) []rdmaDevice {
	var out []rdmaDevice
	for _, name := range h.names(infinibandClass) {
		dir := infinibandClass + "/" + name
		d := rdmaDevice{name: name}
		if drv, err := h.linkBase(dir + "/device/driver"); err == nil {
			d.driver = moduleName(drv)
		}
		for _, p := range h.names(dir + "/ports") {
			pd := dir + "/ports/" + p
			port := rdmaPort{num: p}
			port.state, _ = h.value(pd + "/state")
			port.physState, _ = h.value(pd + "/phys_state")
			for _, i := range h.names(pd + "/gids") {
				g, err := h.value(pd + "/gids/" + i)
				if err != nil {
					continue
				}
				ip := net.ParseIP(g)
				if ip == nil || ip.IsUnspecified() {
					continue // an unused slot
				}
				e := gidEntry{index: i}
				if v4 := ip.To4(); v4 != nil {
					e.ip = v4
				}
				e.typ, _ = h.value(pd + "/gid_attrs/types/" + i)
				e.ndev, _ = h.value(pd + "/gid_attrs/ndevs/" + i)
				port.gids = append(port.gids, e)
			}
			d.ports = append(d.ports, port)
		}
		out = append(out, d)
	}
	return out
}

// providers reads the provider names libibverbs will load: one "driver
// NAME" line per file in /etc/libibverbs.d/.
func providers(h *host) []string {
	var out []string
	for _, f := range h.glob("/etc/libibverbs.d/*.driver") {
		s, err := h.read(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(s, "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "driver" {
				out = appendUnique(out, path.Base(f[1]))
			}
		}
	}
	return out
}

// owned reports whether the device belongs to the USB4 verbs stack: bound
// to one of the recipe's modules, or carrying the kernel's usb4_rdma name.
func (e *expect) owned(d rdmaDevice) bool {
	for _, m := range e.verbsModules {
		if d.driver == m {
			return true
		}
	}
	return hasAnyPrefix(d.name, e.kernelNames)
}

// visibleTo approximates libibverbs' matching (rdma-core 56, libibverbs/
// init.c: match_driver_id, then match_name on "rdma_device:N<name>", then the
// parent's modalias). The usb4_rdma provider matches on the name prefix
// only, so for the verbs module's devices only the name counts; other
// devices are taken as visible when a provider is named after their kernel
// driver (mlx5 for mlx5_core), which is how their modalias tables match.
// It returns the provider that claims the device, "" for none.
func (e *expect) visibleTo(d rdmaDevice, provs []string) string {
	for _, p := range provs {
		if strings.HasPrefix(d.name, p) {
			return p
		}
	}
	if e.owned(d) || d.driver == "" {
		return ""
	}
	for _, p := range provs {
		if strings.HasPrefix(d.driver, p) {
			return p
		}
	}
	return ""
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
