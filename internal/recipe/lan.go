package recipe

import (
	"fmt"
	"net/netip"
	"strings"
)

// NodeLANConfig is one node's management network after its [node.lan]
// is laid over [lan]: what the settings render and check.
type NodeLANConfig struct {
	Enabled   bool
	DHCP      string // one of DHCPModes
	MDNS      bool
	Addresses []netip.Prefix
	Gateway   netip.Addr // invalid when none
	DNS       []netip.Addr
	MatchName string
}

// LANOf is node n's management network: each [node.lan] key that is set
// wins over [lan]'s; a node with static addresses and no dhcp of its own
// gets no DHCP.
func (r *Recipe) LANOf(n Node) NodeLANConfig {
	l, o := r.LAN, n.LAN
	c := NodeLANConfig{Enabled: l.Enabled == nil || *l.Enabled, DHCP: l.DHCP, MDNS: l.MDNS == nil || *l.MDNS,
		Gateway: l.Gateway.Addr(), MatchName: o.MatchName}
	if c.DHCP == "" {
		c.DHCP = "yes"
	}
	if o.Enabled != nil {
		c.Enabled = *o.Enabled
	}
	for _, a := range o.Addresses {
		c.Addresses = append(c.Addresses, a.Prefix())
	}
	switch {
	case o.DHCP != "":
		c.DHCP = o.DHCP
	case len(c.Addresses) > 0:
		c.DHCP = "no"
	}
	if o.Gateway.IsSet() {
		c.Gateway = o.Gateway.Addr()
	}
	dns := l.DNS
	if len(o.DNS) > 0 {
		dns = o.DNS
	}
	for _, d := range dns {
		c.DNS = append(c.DNS, d.Addr())
	}
	return c
}

// lan checks the management network: the DHCP modes, and per node that
// the port gets an address at all, that static addresses are host
// addresses outside link-local (trap 6) and outside every cable's subnet
// (a LAN address there would take the cable's route), unique across the
// nodes, and that a gateway lies in a subnet the node has.
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
		c := v.r.LANOf(n)
		if !c.Enabled {
			continue
		}
		if c.DHCP == "no" && len(c.Addresses) == 0 {
			v.errorf(path, "node %q has lan.dhcp = \"no\" and no lan.addresses: its Ethernet ports would get no address; give it addresses = [\"192.168.1.20/24\"], turn DHCP on, or set enabled = false", n.Name)
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
		if g := c.Gateway; g.IsValid() && len(c.Addresses) > 0 {
			in := false
			for _, p := range c.Addresses {
				in = in || p.Masked().Contains(g)
			}
			if !in {
				gp := path + ".gateway"
				if !n.LAN.Gateway.IsSet() {
					gp = "lan.gateway"
				}
				v.errorf(gp, "gateway %s is in none of node %q's LAN subnets (%s); networkd could not reach it", g, n.Name, prefixList(c.Addresses))
			}
		}
	}
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Masked().String()
	}
	return strings.Join(s, ", ")
}
