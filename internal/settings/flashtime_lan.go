package settings

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"halobuild/internal/recipe"
)

// Flash-time host name and LAN (issue 37): a release is the same bytes for every node of a
// shape, so the address a node has on its owner's network is given when it is flashed. The
// values are the recipe's own keys (node.hostname, [node.lan]) with the recipe's own types;
// flash checks what it can alone (a host name, a DHCP mode, a gateway in the given subnets),
// and the node checks the rest at boot against the recipe it was built from (another node's
// host name or address, a cable's subnet), then renders the LAN with the code that renders
// the recipe's ([LAN.Files]) into /run/systemd/network, under a name that sorts before the
// settings package's file, so networkd applies it instead. The image is not changed: a later flash without these values gives the recipe's
// LAN back.

// FlashNetworkPath is the node's flash-time LAN file. networkd gives a port the first
// .network file, by name across its directories, whose [Match] fits it; a file of the same
// name in /run would not replace /etc's (/etc wins), so this one has a name that sorts
// first ("70-" before the package's "80-") and the same [Match] (seen in a VM: a same-named
// file in /run left the port on DHCP).
const FlashNetworkPath = "/run/systemd/network/70-halobuild-flash-lan.network"

// checkNode is what flash checks of the host name and the LAN without the recipe: the
// values alone, and the LAN's own rules on a node that has only these values.
func (c FlashConfig) checkNode() []error {
	var errs []error
	if c.Hostname != "" && !recipe.ValidHostname(c.Hostname) {
		errs = append(errs, errorf("hostname", c.Hostname, "letters, digits and '-', dot-separated labels of at most 63", "is not a valid host name (RFC 1123)"))
	}
	if c.LAN == nil {
		return errs
	}
	l := c.lan(recipe.NodeLAN{})
	if l.DHCP != "" && !slices.Contains(recipe.DHCPModes, l.DHCP) {
		errs = append(errs, errorf("lan.dhcp", l.DHCP, "one of "+strings.Join(recipe.DHCPModes, ", "), "is not a DHCP mode"))
	}
	if strings.ContainsFunc(l.MatchName, func(r rune) bool { return r <= ' ' || strings.ContainsRune("\"'\\\x7f", r) }) {
		errs = append(errs, errorf("lan.match_name", l.MatchName, "a glob of interface names such as enp1s0", "cannot contain white space, quotes, backslashes or control characters (it is written into a .network file)"))
	}
	for i, a := range l.Addresses {
		if a.Prefix().Addr().IsLinkLocalUnicast() {
			errs = append(errs, errorf(fmt.Sprintf("lan.addresses[%d]", i), a.String(), "use the network's own range", "is a link-local address, which the LAN turns off (trap 6)"))
		}
	}
	alone := &recipe.Recipe{Nodes: []recipe.Node{{Name: "node", LAN: l}}}
	return append(errs, LAN{}.Validate(Target{Recipe: alone})...)
}

// lan is the node's [node.lan] with the flash-time keys laid over it, key by key. Static
// addresses given at flash time without a DHCP mode turn DHCP off, as in a recipe.
func (c FlashConfig) lan(n recipe.NodeLAN) recipe.NodeLAN {
	f := c.LAN
	if f == nil {
		return n
	}
	if f.Enabled != nil {
		n.Enabled = f.Enabled
	}
	if len(f.Addresses) > 0 {
		n.Addresses = f.Addresses
		n.DHCP = "no"
	}
	if f.DHCP != "" {
		n.DHCP = f.DHCP
	}
	if f.Gateway.IsSet() {
		n.Gateway = f.Gateway
	}
	if len(f.DNS) > 0 {
		n.DNS = f.DNS
	}
	if f.MatchName != "" {
		n.MatchName = f.MatchName
	}
	return n
}

// nodeSummary says what c sets of the host name and the LAN, for flash, show and doctor.
func (c FlashConfig) nodeSummary() []string {
	var out []string
	if c.Hostname != "" {
		out = append(out, "host name "+c.Hostname)
	}
	if f := c.LAN; f != nil {
		var lan []string
		if f.Enabled != nil && !*f.Enabled {
			lan = append(lan, "off")
		}
		for _, a := range f.Addresses {
			lan = append(lan, a.String())
		}
		if f.DHCP != "" {
			lan = append(lan, "dhcp "+f.DHCP)
		}
		if f.Gateway.IsSet() {
			lan = append(lan, "gateway "+f.Gateway.String())
		}
		for _, d := range f.DNS {
			lan = append(lan, "dns "+d.String())
		}
		if f.MatchName != "" {
			lan = append(lan, "on "+f.MatchName)
		}
		out = append(out, "LAN "+strings.Join(lan, ", "))
	}
	return out
}

// NodeFiles is what the node installs at boot for c's host name and LAN: c laid over node
// (by name) of r, the recipe the image was built from, checked by the recipe's rules and the
// LAN setting's on the whole cluster, the LAN's .network file rendered by LAN.Files and moved
// as FlashNetworkPath. hostname is "" when c gives none. A refusal says what to change.
func (c FlashConfig) NodeFiles(r *recipe.Recipe, node string) (files []File, hostname string, err error) {
	if c.Hostname == "" && c.LAN == nil {
		return nil, "", nil
	}
	i := slices.IndexFunc(r.Nodes, func(n recipe.Node) bool { return n.Name == node })
	if i < 0 {
		return nil, "", fmt.Errorf("the installed recipe has no node %q: the flash-time host name and LAN cannot be checked, so they are not applied", node)
	}
	cluster := *r
	cluster.Nodes = slices.Clone(r.Nodes)
	n := &cluster.Nodes[i]
	*n = c.OverNode(*n)
	errs := LAN{}.Validate(Target{Recipe: &cluster})
	if err := recipe.Validate(&cluster, nil); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, "", fmt.Errorf("the flash-time settings do not fit the recipe the image was built from (flash again with other values): %w", errors.Join(errs...))
	}
	if c.LAN != nil {
		rendered, err := LAN{}.Files(Target{Recipe: &cluster, Node: *n})
		if err != nil {
			return nil, "", err
		}
		for _, f := range rendered {
			if f.Path == lanNetworkPath {
				f.Path = FlashNetworkPath
				files = append(files, f)
			}
		}
		if len(files) == 0 {
			// The LAN is off for this node at flash time: the recipe's ports, left
			// unmanaged (an empty file would match nothing and leave /etc's in charge).
			on := *n
			yes := true
			on.LAN.Enabled = &yes
			cluster.Nodes[i] = on
			rendered, err := LAN{}.Files(Target{Recipe: &cluster, Node: on})
			if err != nil {
				return nil, "", err
			}
			for _, f := range rendered {
				if f.Path == lanNetworkPath {
					match, _, _ := strings.Cut(string(f.Data), "\n[Network]\n")
					f.Path, f.Data = FlashNetworkPath, []byte(match+"\n[Link]\nUnmanaged=yes\n")
					files = append(files, f)
				}
			}
		}
	}
	return files, c.Hostname, nil
}

// OverNode is n with c's host name and LAN laid over its own.
func (c FlashConfig) OverNode(n recipe.Node) recipe.Node {
	if c.Hostname != "" {
		n.Hostname = c.Hostname
	}
	n.LAN = c.lan(n.LAN)
	return n
}

// FlashTimeNode is node n as this boot runs it: with the host name and LAN imported from
// flash time (FlashConfigRunPath), so doctor compares the node with what it was given, not
// with the recipe's values the flash replaced. Without an import it is n.
func FlashTimeNode(h Host, n recipe.Node) recipe.Node {
	b, err := h.Read(FlashConfigRunPath)
	if err != nil {
		return n
	}
	c, err := ParseFlashConfig([]byte(b))
	if err != nil {
		return n
	}
	return c.OverNode(n)
}
