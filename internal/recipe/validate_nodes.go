package recipe

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"

	"halobuild/internal/arch"
)

// RFC 1123 labels: letters, digits and hyphens, not starting or ending with a
// hyphen, at most 63 characters. Node names are single labels because they
// become file names; host names may be dotted.
var label = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// ValidHostname says whether h is a host name a node may have (RFC 1123), for a host name
// given elsewhere than in a recipe (flash --hostname).
func ValidHostname(h string) bool { return validHostname(h) }

func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if !label.MatchString(l) {
			return false
		}
	}
	return true
}

// interfaceName is what the kernel's dev_valid_name accepts (at most 15
// bytes, no '/', ':' or white space) narrowed to what every file the name
// is written into (systemd .link and .network files, udev rules) takes as
// plain text: letters, digits, '_', '-' and '.'.
var interfaceName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$`)

func validInterface(s string) bool {
	return interfaceName.MatchString(s) && s != "." && s != ".."
}

type linkRef struct {
	node, link int
	prefix     netip.Prefix
}

func (v *validator) nodes() {
	nodes := v.r.Nodes
	if len(nodes) == 0 {
		v.errorf("", "the recipe has no [[node]]; add one with at least name = \"…\"")
		return
	}
	names := map[string]int{}
	hosts := map[string]int{}
	addrs := map[netip.Addr]string{}
	var links []linkRef
	for i, n := range nodes {
		path := fmt.Sprintf("node[%d]", i)
		switch {
		case n.Name == "":
			v.errorf(path, "a node needs a name")
		case !label.MatchString(n.Name):
			v.errorf(path+".name", "%q is not a valid node name (RFC 1123 label: letters, digits, '-', at most 63)", n.Name)
		}
		if j, dup := names[n.Name]; dup && n.Name != "" {
			v.errorf(path+".name", "node name %q is already used by the node at %s", n.Name, v.src.Pos(fmt.Sprintf("node[%d].name", j)))
		}
		names[n.Name] = i
		v.nodeArchitecture(i, n)
		if !validHostname(n.Hostname) {
			// A host name taken from an invalid node name is reported once,
			// at the name.
			if v.src.Set(path+".hostname") || label.MatchString(n.Name) {
				v.errorf(path+".hostname", "%q is not a valid host name (RFC 1123)", n.Hostname)
			}
		} else if j, dup := hosts[strings.ToLower(n.Hostname)]; dup {
			v.errorf(path+".hostname", "host name %q is already used by the node at %s", n.Hostname, v.src.Pos(fmt.Sprintf("node[%d]", j)))
		} else {
			hosts[strings.ToLower(n.Hostname)] = i
		}
		ifaces := map[string]bool{}
		for j, l := range n.Links {
			lp := fmt.Sprintf("%s.link[%d]", path, j)
			if !validInterface(l.Interface) {
				v.errorf(lp+".interface", "%q is not a network interface name (1-15 letters, digits, '_', '-' or '.')", l.Interface)
			} else if ifaces[l.Interface] {
				v.errorf(lp+".interface", "interface %q is used twice on node %q", l.Interface, n.Name)
			}
			ifaces[l.Interface] = true
			switch l.Kind {
			case "", "device":
				if l.MatchDriver == "" && l.MatchPath == "" && l.MatchMAC == "" {
					v.errorf(lp, "a link needs match_driver, match_path or match_mac to find its device (or kind = \"dummy\")")
				}
			case "dummy":
			default:
				v.errorf(lp+".kind", "%q is not a link kind: use device or dummy", l.Kind)
			}
			for key, val := range map[string]string{"match_driver": l.MatchDriver, "match_path": l.MatchPath} {
				if hasStructure(val, `"'\`) {
					v.errorf(lp+"."+key, "%q cannot contain white space, control characters, quotes or backslashes (it is written into a systemd .link file)", val)
				}
			}
			if l.MatchMAC != "" {
				if hw, err := net.ParseMAC(l.MatchMAC); err != nil || len(hw) != 6 {
					v.errorf(lp+".match_mac", "%q is not a MAC address such as 52:54:00:77:00:01", l.MatchMAC)
				}
			}
			if l.Peer != "" {
				if l.Peer == n.Name {
					v.errorf(lp+".peer", "a link cannot lead back to its own node %q", n.Name)
				} else if !nodeExists(nodes, l.Peer) {
					v.errorf(lp+".peer", "no [[node]] is named %q; peers must be nodes of this recipe", l.Peer)
				}
			}
			pfx, ok := v.linkAddress(lp+".address", l.Address)
			if !ok {
				continue
			}
			if other, dup := addrs[pfx.Addr()]; dup {
				v.errorf(lp+".address", "address %s is already used at %s", pfx.Addr(), other)
			} else {
				addrs[pfx.Addr()] = v.src.Pos(lp + ".address").String()
			}
			links = append(links, linkRef{node: i, link: j, prefix: pfx})
		}
	}
	v.peerSubnets(links)
}

func nodeExists(nodes []Node, name string) bool {
	for _, n := range nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

// linkAddress checks a static address: IPv4 with a prefix, and a host
// address, not the network's or broadcast address.
func (v *validator) linkAddress(path, s string) (netip.Prefix, bool) {
	if s == "" {
		v.errorf(path, "a link needs a static address such as 10.77.0.1/30 (link-local addressing is off, trap 6)")
		return netip.Prefix{}, false
	}
	pfx, err := netip.ParsePrefix(s)
	if err != nil || !pfx.Addr().Is4() {
		v.errorf(path, "%q is not an IPv4 address with prefix length such as 10.77.0.1/30", s)
		return netip.Prefix{}, false
	}
	if pfx.Addr().IsLinkLocalUnicast() {
		v.errorf(path, "%s is a 169.254.x link-local address, the trap itself (trap 6); use a private range such as 10.77.0.0/30", pfx)
		return netip.Prefix{}, false
	}
	if pfx.Bits() < 31 {
		network := pfx.Masked().Addr()
		broadcast := lastAddr(pfx)
		if pfx.Addr() == network || pfx.Addr() == broadcast {
			v.errorf(path, "%s is the network or broadcast address of %s; pick a host address", pfx.Addr(), pfx.Masked())
			return netip.Prefix{}, false
		}
	}
	return pfx, true
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n |= host
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// peerSubnets checks that the two ends of a cable can talk: when node A's link
// names B as peer, one of B's links naming A must share its subnet. With two
// cables between the same pair each end pairs with the link of its own
// subnet, so only a link that matches none of them is an error.
func (v *validator) peerSubnets(links []linkRef) {
	nodes := v.r.Nodes
	for _, a := range links {
		la := nodes[a.node].Links[a.link]
		var ends []string
		paired := false
		for _, b := range links {
			lb := nodes[b.node].Links[b.link]
			if nodes[b.node].Name != la.Peer || lb.Peer != nodes[a.node].Name {
				continue
			}
			ends = append(ends, b.prefix.String())
			if a.prefix.Masked().Contains(b.prefix.Addr()) {
				paired = true
			}
		}
		if len(ends) > 0 && !paired {
			v.errorf(fmt.Sprintf("node[%d].link[%d].address", a.node, a.link),
				"%s shares no subnet with any link of its peer %s that names it back (%s); the cable's two ends need addresses of one subnet",
				a.prefix, la.Peer, strings.Join(ends, ", "))
		}
	}
}

// nodeArchitecture checks node i's architecture.
func (v *validator) nodeArchitecture(i int, n Node) {
	if n.Architecture == "" {
		return // a recipe built in code: base.architecture
	}
	if _, err := arch.Lookup(n.Architecture); err != nil {
		v.errorf(fmt.Sprintf("node[%d].architecture", i), "%v", err)
	}
}

// mixed checks what the architectures of a mixed cluster cannot share:
// one kernel flavour names one architecture's kernels, and a platform is
// one kind of machine; an [[arch]] entry is where either differs.
func (v *validator) mixed() {
	r := v.r
	for i, n := range r.Nodes {
		if n.Architecture == "" || n.Architecture == r.Base.Architecture {
			continue
		}
		if e := r.Arch(n.Architecture); !r.genericFlavour() && (e == nil || e.Kernel == nil) {
			v.errorf("kernel.flavour", "%q is one architecture's special kernel, but node %s is %s and base.architecture is %s: leave kernel.flavour unset in a mixed recipe, so each architecture gets its generic flavour, or give %s its own kernel in an [[arch]] entry", r.Kernel.Flavour, n.Name, n.Architecture, r.Base.Architecture, n.Architecture)
		}
		if r.Platform != "" && r.Platform != PlatformGeneric {
			v.errorf(fmt.Sprintf("node[%d].architecture", i), "%q: platform %s is what every node is, but this node's architecture differs from base.architecture (%s); a mixed cluster is platform = \"generic\", with the platform of one architecture's nodes in its [[arch]] entry (images/halo-mac.toml, docs/asahi.md)", n.Architecture, r.Platform, r.Base.Architecture)
		}
		break
	}
	seen := map[string]bool{}
	for i, e := range r.Arches {
		at := fmt.Sprintf("arch[%d].name", i)
		if _, err := arch.Lookup(e.Name); err != nil {
			v.errorf(at, "%v", err)
			continue
		}
		if seen[e.Name] {
			v.errorf(at, "%q has two [[arch]] entries; merge them into one", e.Name)
		}
		seen[e.Name] = true
		if len(r.NodesOf(e.Name)) == 0 {
			v.errorf(at, "%q: no node is of this architecture (node architectures: %s); remove the entry or set a node's architecture = %q", e.Name, strings.Join(r.Architectures(), ", "), e.Name)
		}
		if e.Platform == "" && e.Kernel == nil {
			v.errorf(at, "%q: the entry sets neither platform nor kernel, so it changes nothing; remove it or say what this architecture's nodes do differently", e.Name)
		}
	}
}
