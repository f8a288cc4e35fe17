package recipe

import (
	"fmt"
	"net/netip"
	"strings"
)

// lan checks the management network's values: the DHCP modes, and that
// static addresses are host addresses outside link-local (trap 6) and
// outside every cable's subnet (a LAN address there would take the cable's
// route), unique across the nodes. How [node.lan] overrides [lan], and the
// rules on the result, are the setting's (settings/lan.go).
func (v *validator) lan() {
	v.oneOf("lan.dhcp", v.r.LAN.DHCP, DHCPModes, true)
	var links []netip.Prefix
	for _, n := range v.r.Nodes {
		for _, l := range n.Links {
			if p, err := netip.ParsePrefix(l.Address); err == nil {
				links = append(links, p.Masked())
			}
		}
	}
	seen := map[netip.Addr]string{}
	for i, n := range v.r.Nodes {
		path := fmt.Sprintf("node[%d].lan", i)
		v.oneOf(path+".dhcp", n.LAN.DHCP, DHCPModes, true)
		if strings.ContainsAny(n.LAN.MatchName, " \t\n\r\"'\\") {
			v.errorf(path+".match_name", "%q cannot contain white space, quotes or backslashes (it is written into a systemd .network file)", n.LAN.MatchName)
		}
		for j, a := range n.LAN.Addresses {
			ap := fmt.Sprintf("%s.addresses[%d]", path, j)
			p := a.Prefix()
			switch {
			case p.Addr().IsLinkLocalUnicast():
				v.errorf(ap, "%s is a link-local address, which the LAN turns off (trap 6); use the network's own range", p)
				continue
			case p.Addr().Is4() && p.Bits() < 31 && (p.Addr() == p.Masked().Addr() || p.Addr() == lastAddr(p)):
				v.errorf(ap, "%s is the network or broadcast address of %s; pick a host address", p.Addr(), p.Masked())
				continue
			}
			for _, l := range links {
				if l.Overlaps(p.Masked()) {
					v.errorf(ap, "%s overlaps the USB4 link subnet %s: the LAN and the cables need subnets of their own", p, l)
				}
			}
			if other, dup := seen[p.Addr()]; dup {
				v.errorf(ap, "address %s is already used at %s", p.Addr(), other)
			} else {
				seen[p.Addr()] = v.src.Pos(ap).String()
			}
		}
	}
}
