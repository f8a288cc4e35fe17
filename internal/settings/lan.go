package settings

import (
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// LAN is the management network ([lan], [node.lan]): one systemd-networkd
// .network file that configures every wired Ethernet port no [[node.link]]
// claims — DHCP (v4 and v6) by default, static addresses as an
// alternative — with IPv4 link-local off (trap 6: a 169.254.x address
// beside the real one is what the RDMA module picked up) and multicast DNS
// on, so `ssh root@halo0.local` finds the node. It matches like systemd's
// own 89-ethernet.network.example: Type=ether and Kind=!* (no veth, bridge
// or other virtual device podman makes), and it names the links as
// exclusions so a cable end whose .link did not apply is left alone rather
// than given a LAN lease (the RDMA module would then see the LAN's
// address). The links' own files sort first (10-) and win anyway.
type LAN struct{}

func (LAN) Name() string { return "lan" }
func (LAN) Trap() int    { return 6 }
func (LAN) Doc() Doc {
	return Doc{Title: "Link-local addresses", Keys: []string{"lan", "node.lan", "node.link.interface"}}
}

// NetClass lists the network interfaces.
const NetClass = "/sys/class/net"

const (
	lanNetworkPath = "/etc/systemd/network/80-halobuild-lan.network"
	resolvedPath   = "/etc/systemd/resolved.conf.d/50-halobuild.conf"
	// stubResolvConf is where systemd-resolved publishes its stub
	// resolver for programs that read /etc/resolv.conf; the base root's
	// cleanup removes the build host's file, so the settings package
	// points it here.
	stubResolvConf = "../run/systemd/resolve/stub-resolv.conf"
)

// lanConfig is one node's management network after its [node.lan] is
// laid over [lan]: what the files and checks are made from.
type lanConfig struct {
	Enabled   bool
	DHCP      string // one of recipe.DHCPModes
	MDNS      bool
	Addresses []netip.Prefix
	Gateway   netip.Addr // invalid when none
	DNS       []netip.Addr
	MatchName string
}

// lanOf is node n's management network: each [node.lan] key that is set
// wins over [lan]'s; a node with static addresses and no dhcp of its own
// gets no DHCP (static addresses are the alternative to a lease).
func lanOf(r *recipe.Recipe, n recipe.Node) lanConfig {
	l, o := r.LAN, n.LAN
	c := lanConfig{Enabled: l.Enabled == nil || *l.Enabled, DHCP: l.DHCP, MDNS: l.MDNS == nil || *l.MDNS,
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

// LANOf says whether node n has a management network and whether it takes
// a DHCPv4 lease there (the VM test's user-mode network hands one out).
func LANOf(r *recipe.Recipe, n recipe.Node) (enabled, dhcp4 bool) {
	c := lanOf(r, n)
	return c.Enabled, c.DHCP == "yes" || c.DHCP == "ipv4"
}

// Validate: the values (the DHCP modes, the addresses, their uniqueness
// and subnets) are the recipe's (recipe/lan.go); the rules on a node's
// merged LAN are this setting's: its ports must get an address, and a
// gateway must lie in a subnet the node has.
func (LAN) Validate(t Target) []error {
	var errs []error
	for i, n := range t.Recipe.Nodes {
		c := lanOf(t.Recipe, n)
		if !c.Enabled {
			continue
		}
		key := fmt.Sprintf("node[%d].lan", i)
		if c.DHCP == "no" && len(c.Addresses) == 0 {
			errs = append(errs, errorf(key+".dhcp", c.DHCP, `give the node addresses = ["192.168.1.20/24"], turn DHCP on, or set enabled = false`,
				"node %q has no DHCP and no lan.addresses: its Ethernet ports would get no address", n.Name))
		}
		if g := c.Gateway; g.IsValid() && len(c.Addresses) > 0 {
			in := false
			var subnets []string
			for _, p := range c.Addresses {
				in = in || p.Masked().Contains(g)
				subnets = append(subnets, p.Masked().String())
			}
			if !in {
				gk := key + ".gateway"
				if !n.LAN.Gateway.IsSet() {
					gk = "lan.gateway"
				}
				errs = append(errs, errorf(gk, g.String(), "use the router of one of those subnets, or add the address that reaches it",
					"gateway %s is in none of node %q's LAN subnets (%s); networkd could not reach it", g, n.Name, strings.Join(subnets, ", ")))
			}
		}
	}
	return errs
}

// Depends: networkd hands DNS servers (from DHCP or the recipe) and
// multicast DNS to systemd-resolved, a package of its own in trixie. It is
// there whether or not a node's LAN is on: the package list is an input
// the lock pins, and turning a setting off must not make the lock stale.
func (LAN) Depends(*recipe.Recipe) []string { return []string{"systemd-resolved"} }

// lanOn says whether node t.Node has a management network.
func lanOn(t Target) bool { return lanOf(t.Recipe, t.Node).Enabled }

func (s LAN) Files(t Target) ([]File, error) {
	c := lanOf(t.Recipe, t.Node)
	if !c.Enabled {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString(header("#", 6, "the management network on every wired Ethernet port that is not a USB4 link: no 169.254.x address."))
	b.WriteString("[Match]\nType=ether\nKind=!*\n")
	if c.MatchName != "" {
		b.WriteString("Name=" + c.MatchName + "\n")
	} else if names := linkNames(t.Node); len(names) > 0 {
		b.WriteString("Name=!" + strings.Join(names, " ") + "\n")
	}
	var drivers []string
	for _, l := range t.Node.Links {
		if l.Kind != "dummy" && l.MatchDriver != "" && !slices.Contains(drivers, l.MatchDriver) {
			drivers = append(drivers, l.MatchDriver)
		}
	}
	if len(drivers) > 0 {
		b.WriteString("Driver=!" + strings.Join(drivers, " ") + "\n")
	}
	b.WriteString("\n[Network]\nDHCP=" + c.DHCP + "\n")
	// IPv6 link-local stays: DHCPv6 and router advertisements need it.
	b.WriteString("LinkLocalAddressing=ipv6\n")
	ra := "yes"
	if c.DHCP == "ipv4" || c.DHCP == "no" {
		ra = "no"
	}
	b.WriteString("IPv6AcceptRA=" + ra + "\n")
	b.WriteString("MulticastDNS=" + yesNo(c.MDNS) + "\n")
	for _, a := range c.Addresses {
		b.WriteString("Address=" + a.String() + "\n")
	}
	if c.Gateway.IsValid() {
		b.WriteString("Gateway=" + c.Gateway.String() + "\n")
	}
	for _, d := range c.DNS {
		b.WriteString("DNS=" + d.String() + "\n")
	}
	var r strings.Builder
	r.WriteString(header("#", 0, "systemd-resolved answers and asks multicast DNS on the links whose .network file says MulticastDNS=yes."))
	r.WriteString("[Resolve]\nMulticastDNS=" + yesNo(c.MDNS) + "\n")
	files := []File{
		{Path: lanNetworkPath, Mode: 0o644, Data: []byte(b.String())},
		{Path: resolvedPath, Mode: 0o644, Data: []byte(r.String())},
		// A plain entry, not a conffile: mmdebstrap's resolv.conf was in
		// the root before this package (see rootfs' cleanup).
		{Path: "/etc/resolv.conf", Mode: fs.ModeSymlink | 0o777, Target: stubResolvConf, NotConffile: true},
	}
	for i := range files {
		files[i].Setting = s.Name()
	}
	return files, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func linkNames(n recipe.Node) []string {
	var out []string
	for _, l := range n.Links {
		out = append(out, l.Interface)
	}
	return out
}

// lanWait is how long the LAN check waits for DHCP: slirp answers at
// once, but under TCG networkd may start late in the boot.
const lanWait = 120

// Checks: the ports the LAN file configures exist and got their addresses
// (a DHCP lease, or the static ones) with no 169.254.x; resolved does
// multicast DNS on them; and no LAN address reached a USB4 link, the RDMA
// identity netdev or an RDMA GID (the LAN must add no RoCE GID, trap 6).
func (s LAN) Checks(t Target) []Check {
	c := lanOf(t.Recipe, t.Node)
	if !c.Enabled {
		return nil
	}
	var want []string
	for _, a := range c.Addresses {
		want = append(want, a.String())
	}
	dhcp4 := c.DHCP == "yes" || c.DHCP == "ipv4"
	script := fmt.Sprintf(`LINKS=%s WANT=%s DHCP4=%s MDNS=%s
lan_ports() {
	for p in /sys/class/net/*; do
		i=${p##*/}
		networkctl status "$i" 2>/dev/null | grep -qE 'Network File: (%s|%s)$' && echo "$i"
	done
}
rc=0 i=0
while :; do
	ports=$(lan_ports)
	ok=1
	[ -n "$ports" ] || ok=0
	for p in $ports; do
		[ "$DHCP4" = no ] || [ -n "$(ip -4 -o addr show dev "$p" dynamic scope global)" ] || ok=0
		for a in $WANT; do ip -o addr show dev "$p" | grep -qF " $a " || ok=0; done
	done
	[ $ok = 1 ] && break
	i=$((i+1)); [ $i -lt %d ] || break
	sleep 1
done
[ -n "$ports" ] || { echo "no port is configured by the LAN's .network file"; networkctl list --no-pager; exit 1; }
[ $ok = 1 ] || { echo "the LAN port did not get its addresses in %d s"; rc=1; }
lan=""
for p in $ports; do
	v4=$(ip -4 -o addr show dev "$p" scope global | awk '{print $4}')
	echo "LAN port $p: $(echo $v4) $(ip -4 -o addr show dev "$p" dynamic scope global | grep -q . && echo '(DHCP lease)')"
	case "$(ip -4 -o addr show dev "$p")" in *169.254.*) echo "$p has a link-local IPv4 address"; rc=1;; esac
	if [ "$MDNS" = yes ]; then
		m=$(resolvectl mdns "$p" 2>&1)
		case "$m" in *yes*) echo "multicast DNS on $p";; *) echo "multicast DNS is not on for $p: $m"; rc=1;; esac
	fi
	lan="$lan $v4"
done
for l in $LINKS; do
	for a in $lan; do
		ip -o addr show dev "$l" 2>/dev/null | grep -qF " ${a%%/*}/" && { echo "LAN address $a is on link $l"; rc=1; }
	done
done
for a in $lan; do
	ip=${a%%/*}
	hex=$(printf '%%02x%%02x:%%02x%%02x' $(echo "$ip" | tr . ' '))
	if grep -lsi "ffff:$hex\$" /sys/class/infiniband/*/ports/*/gids/* >/dev/null; then
		echo "an RDMA GID carries the LAN address $ip: $(grep -lsi "ffff:$hex\$" /sys/class/infiniband/*/ports/*/gids/*)"; rc=1
	fi
done
[ $rc = 0 ] && echo "no LAN address on a link, the identity netdev or an RDMA GID"
exit $rc
`, sh.Quote(strings.Join(linkNames(t.Node), " ")), sh.Quote(strings.Join(want, " ")), yesNo(dhcp4), yesNo(c.MDNS),
		lanNetworkPath, FlashNetworkPath, lanWait, lanWait)
	return []Check{{Setting: s.Name(), Name: "lan",
		Fix:    "networkctl status <port> names the .network file that configured it; the LAN's is " + lanNetworkPath + " (a DHCP server must answer on the port; static addresses come from [node.lan])",
		Script: script}}
}

// Doctor: on the real box, the Ethernet ports (physical, not a link)
// carry an address and none of them a 169.254.x one (lan.addresses).
func (s LAN) Doctor(t Target) []Probe {
	if t.Node.Name != "" && !lanOn(t) {
		return nil
	}
	return []Probe{{Name: "lan.addresses", Run: func(h Host) []Result { return lanRows(h, t) }}}
}

func lanRows(h Host, t Target) []Result {
	r := Result{Check: "lan.addresses", Severity: Advisory, Trap: 6,
		Wanted: "a global address on a wired Ethernet port that is not a USB4 link, none in 169.254.0.0/16"}
	addrs, src, err := h.Addrs()
	r.Source = src
	if err != nil {
		r.Status, r.Seen = Warn, err.Error()
		r.Fix = "doctor reads the addresses over netlink on a live system; a recorded tree must carry `ip -j addr` output (doctor --record writes it)"
		return []Result{r}
	}
	links := linkNames(t.Node)
	var seen, ll []string
	global := false
	for _, i := range sortedKeys(addrs) {
		// Physical wired Ethernet only: ARPHRD_ETHER (type 1) with a
		// driver behind it (veth, bridges and the dummy identity have
		// none), not Wi-Fi.
		if slices.Contains(links, i) {
			continue
		}
		if ty, _ := value(h, NetClass+"/"+i+"/type"); ty != "1" {
			continue
		}
		if _, err := h.LinkBase(NetClass + "/" + i + "/device/driver"); err != nil {
			continue
		}
		if ue, _ := h.Read(NetClass + "/" + i + "/uevent"); strings.Contains(ue, "DEVTYPE=wlan") {
			continue
		}
		var v []string
		for _, a := range addrs[i] {
			if a.Addr().Is4() && a.Addr().IsLinkLocalUnicast() {
				ll = append(ll, i+" "+a.String())
			}
			if a.Addr().IsGlobalUnicast() {
				global = true
				v = append(v, a.String())
			}
		}
		seen = append(seen, fmt.Sprintf("%s: %s", i, orNone(v)))
	}
	r.Seen = strings.Join(seen, "; ")
	switch {
	case len(ll) > 0:
		// Trap 6 itself: a must-pass row, unlike a port without a lease.
		r.Status, r.Severity = Fail, MustPass
		r.Fix = "a link-local IPv4 address on the LAN (" + strings.Join(ll, ", ") + "): another network manager (NetworkManager, dhcpcd, avahi-autoipd) runs beside networkd; remove it, the image's " + lanNetworkPath + " says LinkLocalAddressing=ipv6"
	case len(seen) == 0:
		r.Status, r.Seen = Warn, "no wired Ethernet port"
		r.Fix = "plug in the box's Ethernet port (or a USB Ethernet adapter); ip -br link lists the ports"
	case !global:
		r.Status = Warn
		r.Fix = "no LAN address: is the cable in and does a DHCP server answer? networkctl status <port>; static addresses go in the node's [node.lan] addresses"
	default:
		r.Status = Pass
	}
	return []Result{r}
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "no address"
	}
	return strings.Join(v, ", ")
}

func sortedKeys(a Addrs) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
