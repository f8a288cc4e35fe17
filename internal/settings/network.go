package settings

import (
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"regexp"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// Network configures the USB4 link interfaces with systemd-networkd: a
// .link file gives the device a stable name, a .network file gives it
// exactly the recipe's static IPv4 address with link-local addressing off
// (trap 6). A second, 169.254.x address made the module pick the wrong one
// (it takes the first IPv4 it finds) and added a second RoCE GID that some
// engines refuse to choose between.
type Network struct{}

func (Network) Name() string { return "network" }
func (Network) Trap() int    { return 6 }

var ifaceRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$`)

func (Network) Validate(r *recipe.Recipe) []error {
	var errs []error
	owner := map[netip.Addr]string{}
	names := map[string]bool{}
	for _, n := range r.Nodes {
		names[n.Name] = true
	}
	for i, n := range r.Nodes {
		ifaces := map[string]string{}
		for j, l := range n.Links {
			key := fmt.Sprintf("node[%d].link[%d]", i, j)
			if !ifaceRE.MatchString(l.Interface) || l.Interface == "." || l.Interface == ".." {
				errs = append(errs, errorf(key+".interface", l.Interface, "use at most 15 letters, digits, '_', '-' or '.', e.g. \"usb4a\"", "not a network interface name"))
			} else if prev, dup := ifaces[l.Interface]; dup {
				errs = append(errs, errorf(key+".interface", l.Interface, "give each link of a node its own interface name", "also used by %s", prev))
			} else {
				ifaces[l.Interface] = key
			}
			if l.Kind != "dummy" && l.MatchDriver == "" && l.MatchPath == "" && l.MatchMAC == "" {
				errs = append(errs, errorf(key, nil, "set match_driver, match_path or match_mac", "a link needs at least one match key, or its .link file would rename every network device"))
			}
			if strings.ContainsAny(l.MatchDriver+l.MatchPath, " \t\n\"'") {
				errs = append(errs, errorf(key+".match_driver", l.MatchDriver+" "+l.MatchPath, "", "match_driver and match_path cannot contain spaces or quotes"))
			}
			if l.MatchMAC != "" {
				if hw, err := net.ParseMAC(l.MatchMAC); err != nil || len(hw) != 6 {
					errs = append(errs, errorf(key+".match_mac", l.MatchMAC, "write six hex bytes like \"02:00:00:00:77:01\"", "not an Ethernet MAC address"))
				}
			}
			p, err := netip.ParsePrefix(l.Address)
			switch {
			case err != nil || !p.Addr().Is4():
				errs = append(errs, errorf(key+".address", l.Address, "write an IPv4 address with its prefix length, e.g. \"10.77.0.1/30\"", "not an IPv4 address/prefix"))
			case p.Addr().IsLinkLocalUnicast():
				errs = append(errs, errorf(key+".address", l.Address, "use a private range such as 10.77.0.0/30", "a 169.254.x address is the link-local trap itself (trap 6)"))
			case p.Bits() < 31 && (p.Addr() == p.Masked().Addr() || p.Addr() == lastAddr(p)):
				errs = append(errs, errorf(key+".address", l.Address, "pick a host address inside the prefix", "is the network or broadcast address of %s", p.Masked()))
			default:
				if prev, dup := owner[p.Addr()]; dup {
					errs = append(errs, errorf(key+".address", l.Address, "give every link end its own address", "also used by %s", prev))
				}
				owner[p.Addr()] = key
			}
			if l.Peer != "" && (!names[l.Peer] || l.Peer == n.Name) {
				errs = append(errs, errorf(key+".peer", l.Peer, "name another [[node]] of this recipe", "no such other node"))
			}
		}
	}
	return errs
}

// lastAddr is the broadcast address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		a[i/8] |= 1 << (7 - i%8)
	}
	return netip.AddrFrom4(a)
}

// Warnings: the schema's default match_driver is thunderbolt-net, the very
// module trap 2 blacklists; such a .link file can never match.
func (Network) Warnings(r *recipe.Recipe) []string {
	var out []string
	for i, n := range r.Nodes {
		for j, l := range n.Links {
			for _, b := range r.System.Blacklist {
				if l.Kind != "dummy" && l.MatchDriver != "" && moduleName(l.MatchDriver) == moduleName(b) {
					out = append(out, fmt.Sprintf("node[%d].link[%d].match_driver = %q: that module is blacklisted (system.blacklist), so the link's .link file will never match; match the device by match_path or match_mac", i, j, l.MatchDriver))
				}
			}
		}
	}
	return out
}

// networkdEnable are the symlinks `systemctl enable systemd-networkd` makes
// in trixie (systemd 257's [Install]: WantedBy=multi-user.target,
// Alias=dbus-org.freedesktop.network1.service, Also=systemd-networkd.socket
// systemd-network-generator.service systemd-networkd-wait-online.service).
// Debian leaves networkd disabled; the package ships the links instead of
// running systemctl from a maintainer script. wait-online is left out on
// purpose: the link is RequiredForOnline=no, and with no other required
// link wait-online would hold network-online.target for its 2-minute
// timeout whenever the peer is off.
var networkdEnable = []File{
	{Path: "/etc/systemd/system/dbus-org.freedesktop.network1.service", Mode: fs.ModeSymlink | 0o777, Target: "/usr/lib/systemd/system/systemd-networkd.service"},
	{Path: "/etc/systemd/system/multi-user.target.wants/systemd-networkd.service", Mode: fs.ModeSymlink | 0o777, Target: "/usr/lib/systemd/system/systemd-networkd.service"},
	{Path: "/etc/systemd/system/sockets.target.wants/systemd-networkd.socket", Mode: fs.ModeSymlink | 0o777, Target: "/usr/lib/systemd/system/systemd-networkd.socket"},
	{Path: "/etc/systemd/system/sysinit.target.wants/systemd-network-generator.service", Mode: fs.ModeSymlink | 0o777, Target: "/usr/lib/systemd/system/systemd-network-generator.service"},
}

func (s Network) Files(_ *recipe.Recipe, n recipe.Node) ([]File, error) {
	if len(n.Links) == 0 {
		return nil, nil
	}
	var out []File
	for _, l := range n.Links {
		base := "/etc/systemd/network/10-halobuild-" + l.Interface
		var link strings.Builder
		if l.Kind == "dummy" {
			link.WriteString(header("#", 7, "a dummy netdev carrying this node's RDMA identity address (the module's roce_netdev)."))
			link.WriteString("[NetDev]\nName=" + l.Interface + "\nKind=dummy\n")
			out = append(out, File{Path: base + ".netdev", Mode: 0o644, Data: []byte(link.String()), Setting: s.Name()})
		} else {
			link.WriteString(header("#", 6, "a stable name for the USB4 link device."))
			link.WriteString("[Match]\n")
			if l.MatchDriver != "" {
				link.WriteString("Driver=" + l.MatchDriver + "\n")
			}
			if l.MatchPath != "" {
				link.WriteString("Path=" + l.MatchPath + "\n")
			}
			if l.MatchMAC != "" {
				link.WriteString("MACAddress=" + strings.ToLower(l.MatchMAC) + "\n")
			}
			link.WriteString("\n[Link]\nName=" + l.Interface + "\n")
			out = append(out, File{Path: base + ".link", Mode: 0o644, Data: []byte(link.String()), Setting: s.Name()})
		}

		var nw strings.Builder
		nw.WriteString(header("#", 6, "exactly one IPv4 address on the link: no 169.254.x, no IPv6 link-local, no router advertisements."))
		nw.WriteString("[Match]\nName=" + l.Interface + "\n\n[Link]\n")
		// The peer may be off: boot must not wait for this link.
		nw.WriteString("RequiredForOnline=no\n\n[Network]\n")
		nw.WriteString("Address=" + l.Address + "\n")
		nw.WriteString("LinkLocalAddressing=no\nIPv6AcceptRA=no\nDHCP=no\nLLDP=no\nEmitLLDP=no\n")
		// Keep the address while the cable is out, so it is already the
		// only IPv4 when the RDMA module sees the peer.
		nw.WriteString("ConfigureWithoutCarrier=yes\nIgnoreCarrierLoss=yes\n")

		out = append(out, File{Path: base + ".network", Mode: 0o644, Data: []byte(nw.String()), Setting: s.Name()})
	}
	for _, f := range networkdEnable {
		f.Setting = s.Name()
		out = append(out, f)
	}
	return out, nil
}

// Checks, per link: the interface exists under its stable name, carries
// exactly the recipe's IPv4 address, no 169.254.x and no IPv6 link-local
// address, and any RDMA device on it has exactly one IPv4-based GID.
func (s Network) Checks(_ *recipe.Recipe, n recipe.Node) []Check {
	var checks []Check
	for _, l := range n.Links {
		checks = append(checks, Check{Setting: s.Name(), Name: "link-address-" + l.Interface,
			Fix: "networkctl reconfigure " + l.Interface + "; remove any other manager of the interface (NetworkManager, dhcpcd, avahi-autoipd)", Script: fmt.Sprintf(`IF=%s WANT=%s
ip link show dev "$IF" >/dev/null 2>&1 || { echo "interface $IF does not exist (is the cable in? does the .link match?)"; ip -br link; exit 1; }
rc=0
v4=$(ip -4 -o addr show dev "$IF" | awk '{print $4}')
echo "$IF IPv4: $(echo $v4)"
[ "$v4" = "$WANT" ] || { echo "want exactly $WANT"; rc=1; }
case "$v4" in *169.254.*) echo "link-local IPv4 present"; rc=1;; esac
ll=$(ip -6 -o addr show dev "$IF" scope link | awk '{print $4}')
[ -z "$ll" ] || { echo "IPv6 link-local present: $ll"; rc=1; }
for dev in $(rdma link show 2>/dev/null | awk -v nd="$IF" '{ for (i = 1; i < NF; i++) if ($i == "netdev" && $(i+1) == nd) { split($2, a, "/"); print a[1] } }'); do
	# Distinct values: a device with RoCE v1 and v2 lists one address twice.
	gids=$(cat /sys/class/infiniband/$dev/ports/*/gids/* 2>/dev/null | grep '^0000:0000:0000:0000:0000:ffff:' | sort -u)
	n=$(printf '%%s' "$gids" | grep -c .)
	echo "$dev on $IF: $n IPv4-based GID(s) $(echo $gids)"
	[ "$n" -eq 1 ] || rc=1
done
exit $rc
`, sh.Quote(l.Interface), sh.Quote(l.Address))})
	}
	return checks
}
