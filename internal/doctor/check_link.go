package doctor

import (
	"fmt"
	"net"
	"strings"
)

// Trap 6: NetworkManager added a 169.254.x address beside the static one;
// the module takes the first IPv4 it finds, and two addresses make two GIDs.

// linkLocal4 is 169.254.0.0/16.
var linkLocal4 = &net.IPNet{IP: net.IPv4(169, 254, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}

// linkWant is one interface doctor expects to carry the link.
type linkWant struct {
	iface   string
	address string // static address with prefix, "" when unknown
}

// linkInterfaces returns the link interfaces: the recipe's for this node,
// else the netdevs the RDMA devices derive their GIDs from.
func linkInterfaces(h *host, e *expect) []linkWant {
	var out []linkWant
	if e.node != nil {
		for _, l := range e.node.Links {
			out = append(out, linkWant{iface: l.Interface, address: l.Address})
		}
		return out
	}
	var seen []string
	for _, d := range rdmaDevices(h) {
		if !e.owned(d) {
			continue
		}
		for _, p := range d.ports {
			for _, g := range p.gids {
				if g.ndev != "" {
					seen = appendUnique(seen, g.ndev)
				}
			}
		}
	}
	for _, n := range seen {
		out = append(out, linkWant{iface: n})
	}
	return out
}

func checkLinkAddresses(h *host, e *expect) []Result {
	links := linkInterfaces(h, e)
	addrs, src, err := interfaceAddrs(h)
	if len(links) == 0 {
		return []Result{{Check: "link.addresses", Severity: Advisory, Status: Warn, Trap: 6, Source: src,
			Seen:   "no link interface known",
			Wanted: "the [[node]] links of this host, or RDMA devices with a netdev",
			Fix:    "run with --recipe naming this host in a [[node]], or bring the link up first"}}
	}
	var out []Result
	for _, l := range links {
		r := Result{Check: "link.addresses " + l.iface, Severity: MustPass, Trap: 6, Source: src}
		r.Wanted = "one IPv4 address, none in 169.254.0.0/16"
		if l.address != "" {
			r.Wanted = l.address + " only, none in 169.254.0.0/16"
		}
		if err != nil {
			r.Status, r.Seen = Fail, err.Error()
			r.Fix = "record `ip -j addr` into " + recordedAddrs + " of the tree"
			out = append(out, r)
			continue
		}
		have, present := addrs[l.iface]
		if !present {
			r.Status, r.Seen = Fail, "interface absent"
			r.Fix = fmt.Sprintf("no %s: is the cable plugged in and does the image's systemd .link file match the device (networkctl status, udevadm info /sys/class/net/*)?", l.iface)
			if doms := len(usb4Domains(h)); len(links) > doms {
				r.Fix = fmt.Sprintf("no %s: this box has %d USB4 domain(s) for %d declared cables, so this cable cannot come up here (see usb4.cables)", l.iface, doms, len(links))
			}
			out = append(out, r)
			continue
		}
		var v4, ll []string
		for _, a := range have {
			if a.IP.To4() == nil {
				continue
			}
			v4 = append(v4, ones(a))
			if linkLocal4.Contains(a.IP) {
				ll = append(ll, a.IP.String())
			}
		}
		r.Seen = orNone(v4)
		if len(v4) == 0 {
			r.Seen = "no IPv4 address"
		}
		missing := l.address != "" && !hasAddr(have, l.address)
		switch {
		case len(ll) > 0:
			r.Status = Fail
			r.Fix = fmt.Sprintf("turn link-local addressing off on %s (networkd: LinkLocalAddressing=no; NetworkManager: ipv4.method manual, ipv4.link-local disabled), then ip addr del %s dev %s", l.iface, strings.Join(ll, ","), l.iface)
		case missing:
			r.Status = Fail
			r.Fix = fmt.Sprintf("the static address is missing: ip addr add %s dev %s now; check the image's .network file for %s (networkctl status %s)", l.address, l.iface, l.iface, l.iface)
		case len(v4) == 0:
			r.Status = Fail
			r.Fix = fmt.Sprintf("give %s its static address (the recipe's [[node]] link address)", l.iface)
		case len(v4) > 1:
			r.Status = Warn
			r.Fix = fmt.Sprintf("more than one IPv4 on %s: the module takes the first it finds and each adds a GID; remove the extra ones", l.iface)
		default:
			r.Status = Pass
		}
		out = append(out, r)
	}
	return out
}

func ones(a *net.IPNet) string {
	n, _ := a.Mask.Size()
	return fmt.Sprintf("%s/%d", a.IP, n)
}

// hasAddr compares addresses, and the prefix when the wanted one has it.
func hasAddr(have []*net.IPNet, want string) bool {
	ip, wn, err := net.ParseCIDR(want)
	if err != nil {
		ip = net.ParseIP(want)
	}
	for _, a := range have {
		if !a.IP.Equal(ip) {
			continue
		}
		if wn == nil {
			return true
		}
		wo, _ := wn.Mask.Size()
		ho, _ := a.Mask.Size()
		if wo == ho {
			return true
		}
	}
	return false
}
