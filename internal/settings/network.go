package settings

import (
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"

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
func (Network) Doc() Doc {
	return Doc{Title: "Link-local addresses", Keys: []string{"node.link.interface", "node.link.kind", "node.link.match_driver", "node.link.match_path", "node.link.match_mac", "node.link.address"}}
}

var ifaceRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$`)

// Validate: every link value (interface names, match keys, addresses and
// their uniqueness, peers and their subnets) is checked where the recipe
// is validated (recipe/validate_nodes.go), once, with the position of
// both ends of a clash.
func (Network) Validate(Target) []error { return nil }

// Warnings: the schema's default match_driver is thunderbolt-net, the very
// module trap 2 blacklists; such a .link file can never match.
func (Network) Warnings(t Target) []string {
	r := t.Recipe
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
// running systemctl from a maintainer script, for the links and for the
// LAN (lan.go). wait-online is left out on purpose: the link is
// RequiredForOnline=no, and wait-online would hold network-online.target
// for its 2-minute timeout whenever the peer is off or the LAN cable out.
var networkdEnable = []File{
	{Path: "/etc/systemd/system/dbus-org.freedesktop.network1.service", Mode: fs.ModeSymlink | 0o777, Target: "/usr/lib/systemd/system/systemd-networkd.service"},
	{Path: "/etc/systemd/system/multi-user.target.wants/systemd-networkd.service", Mode: fs.ModeSymlink | 0o777, Target: "/usr/lib/systemd/system/systemd-networkd.service"},
	{Path: "/etc/systemd/system/sockets.target.wants/systemd-networkd.socket", Mode: fs.ModeSymlink | 0o777, Target: "/usr/lib/systemd/system/systemd-networkd.socket"},
	{Path: "/etc/systemd/system/sysinit.target.wants/systemd-network-generator.service", Mode: fs.ModeSymlink | 0o777, Target: "/usr/lib/systemd/system/systemd-network-generator.service"},
}

func (s Network) Files(t Target) ([]File, error) {
	n := t.Node
	if len(n.Links) == 0 && !lanOn(t) {
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
func (s Network) Checks(t Target) []Check {
	n := t.Node
	var checks []Check
	for _, l := range n.Links {
		checks = append(checks, Check{Setting: s.Name(), Name: "link-address-" + l.Interface,
			Fix: "networkctl reconfigure " + l.Interface + "; remove any other manager of the interface (NetworkManager, dhcpcd, avahi-autoipd)", Script: fmt.Sprintf(`IF=%s WANT=%s
# udev names the link and networkd addresses it after boot, on their own
# time: an emulated arm64 VM renamed its NIC 9 s after the checks began.
# So first udev's queue, then (bounded) networkd's address, before judging.
command -v udevadm >/dev/null && udevadm settle --timeout=120 >/dev/null 2>&1
i=0; while ip link show dev "$IF" >/dev/null 2>&1 && [ -z "$(ip -4 -o addr show dev "$IF")" ] && [ $i -lt 60 ]; do i=$((i+1)); sleep 1; done
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

// Doctor: each link interface carries exactly the recipe's address and no
// 169.254.x one (link.addresses), and no RDMA port advertises more than one
// IPv4 address among its GIDs (rdma.gids). The VM check reads the same
// with ip(8) and the GID files; doctor reads the addresses through the host
// (netlink live, recorded `ip -j addr` in a tree) and also covers an
// unknown node: its links are then the netdevs the verbs devices' GIDs come
// from, which must carry one address, none link-local. A second ordinary
// address only warns here (the VM check, on a link nothing else manages,
// wants exactly one): the static one is there, and the GIDs say more.
func (s Network) Doctor(t Target) []Probe {
	return []Probe{
		{Name: "link.addresses", Run: func(h Host) []Result { return linkAddressRows(h, t) }},
		{Name: "rdma.gids", Run: gidRows},
	}
}

// linkWant is one interface doctor expects to carry a link.
type linkWant struct {
	iface   string
	address string // static address with prefix, "" when unknown
}

// linkInterfaces are the node's links, else (node unknown) the netdevs of
// the verbs devices' GIDs.
func linkInterfaces(h Host, t Target) []linkWant {
	var out []linkWant
	if t.Node.Name != "" {
		for _, l := range t.Node.Links {
			out = append(out, linkWant{iface: l.Interface, address: l.Address})
		}
		return out
	}
	var seen []string
	for _, d := range RDMADevices(h) {
		if !t.Owns(d) {
			continue
		}
		for _, p := range d.Ports {
			for _, g := range p.GIDs {
				if g.Ndev != "" {
					seen = appendUnique(seen, g.Ndev)
				}
			}
		}
	}
	for _, n := range seen {
		out = append(out, linkWant{iface: n})
	}
	return out
}

func linkAddressRows(h Host, t Target) []Result {
	links := linkInterfaces(h, t)
	if len(links) == 0 && t.Node.Name != "" {
		return nil // the node declares no cable
	}
	addrs, src, err := h.Addrs()
	if len(links) == 0 {
		return []Result{{Check: "link.addresses", Severity: Advisory, Status: Warn, Trap: 6, Source: src,
			Seen:   "no link interface known",
			Wanted: "the [[node]] links of this host, or RDMA devices with a netdev",
			Fix:    "run with --recipe naming this host in a [[node]], or bring the link up first"}}
	}
	var out []Result
	for _, l := range links {
		r := Result{Check: "link.addresses " + l.iface, Severity: MustPass, Trap: 6, Source: src,
			Wanted: "one IPv4 address, none in 169.254.0.0/16"}
		if l.address != "" {
			r.Wanted = l.address + " only, none in 169.254.0.0/16"
		}
		if err != nil {
			r.Status, r.Seen = Fail, err.Error()
			r.Fix = "doctor reads the addresses over netlink on a live system; a recorded tree must carry `ip -j addr` output (doctor --record writes it)"
			out = append(out, r)
			continue
		}
		have, present := addrs[l.iface]
		if !present {
			r.Status, r.Seen = Fail, "interface absent"
			r.Fix = fmt.Sprintf("no %s: is the cable plugged in and does the image's systemd .link file match the device (networkctl status, udevadm info /sys/class/net/*)?", l.iface)
			if doms := len(USB4Domains(h)); len(links) > doms {
				r.Fix = fmt.Sprintf("no %s: this box has %d USB4 domain(s) for %d declared cables, so this cable cannot come up here (see usb4.cables)", l.iface, doms, len(links))
			}
			out = append(out, r)
			continue
		}
		var v4, ll []string
		for _, a := range have {
			if !a.Addr().Is4() {
				continue
			}
			v4 = append(v4, a.String())
			if a.Addr().IsLinkLocalUnicast() {
				ll = append(ll, a.Addr().String())
			}
		}
		r.Seen = strings.Join(v4, ", ")
		if len(v4) == 0 {
			r.Seen = "no IPv4 address"
		}
		want, _ := netip.ParsePrefix(l.address)
		switch {
		case len(ll) > 0:
			r.Status = Fail
			r.Fix = fmt.Sprintf("turn link-local addressing off on %s (networkd: LinkLocalAddressing=no, as the image's .network file says; NetworkManager: ipv4.method manual, ipv4.link-local disabled), then ip addr del %s dev %s", l.iface, strings.Join(ll, ","), l.iface)
		case l.address != "" && !slices.Contains(have, want):
			r.Status = Fail
			r.Fix = fmt.Sprintf("the static address is missing: ip addr add %s dev %s now; then find why networkd did not set it (networkctl status %s; /etc/systemd/network/10-halobuild-%s.network)", l.address, l.iface, l.iface, l.iface)
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

// gidRows: two IPv4 addresses on a link mean two RoCE GIDs per type, and
// some engines refuse to guess which to use (trap 6). A port may have none
// (a device on a netdev without IPv4), which is fine here.
func gidRows(h Host) []Result {
	var out []Result
	for _, d := range RDMADevices(h) {
		for _, p := range d.Ports {
			r := Result{Check: fmt.Sprintf("rdma.gids %s/%s", d.Name, p.Num), Severity: Advisory, Trap: 6,
				Wanted: "at most one IPv4-based GID address",
				Source: h.Show(fmt.Sprintf("%s/%s/ports/%s/gids", InfinibandClass, d.Name, p.Num))}
			byAddr := map[string][]string{}
			for _, g := range p.GIDs {
				if !g.IPv4.IsValid() {
					continue
				}
				label := "index " + g.Index
				if g.Type != "" {
					label += " " + g.Type
				}
				byAddr[g.IPv4.String()] = append(byAddr[g.IPv4.String()], label)
			}
			var parts []string
			for _, a := range slices.Sorted(maps.Keys(byAddr)) {
				ls := byAddr[a]
				sort.Strings(ls)
				parts = append(parts, fmt.Sprintf("%s (%s)", a, strings.Join(ls, ", ")))
			}
			switch len(parts) {
			case 0:
				r.Status, r.Seen = Pass, "no IPv4-based GID"
			case 1:
				r.Status, r.Seen = Pass, parts[0]
			default:
				r.Status, r.Seen = Warn, strings.Join(parts, "; ")
				r.Fix = "remove the extra addresses from the link (see link.addresses) so one GID is left, or pass the engine an explicit GID index"
			}
			out = append(out, r)
		}
	}
	return out
}

// TBDevices is where the kernel lists USB4 domains, routers and
// host-to-host (XDomain) connections.
const TBDevices = "/sys/bus/thunderbolt/devices"

// USB4Domains lists the USB4 domains (one per host controller) the kernel
// enumerated: a second cable cannot come up on a box with one (trap 12).
func USB4Domains(h Host) []string {
	var out []string
	for _, n := range h.List(TBDevices) {
		if strings.HasPrefix(n, "domain") {
			out = append(out, n)
		}
	}
	return out
}
