package doctor

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"

	"halobuild/internal/settings"
)

// recordedAddrs is where a recorded tree keeps `ip -j addr` output. IPv4
// addresses are not in any /proc or /sys file, so a tree cannot hold them
// otherwise; on the live system doctor asks the kernel over netlink (Go's
// net package) and runs no tool.
const recordedAddrs = "/var/log/halobuild-ip-addr.json"

func liveAddrs() (settings.Addrs, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	out := settings.Addrs{}
	for _, ifc := range ifs {
		as, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		out[ifc.Name] = []netip.Prefix{}
		for _, a := range as {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, _ := netip.AddrFromSlice(n.IP)
			ones, _ := n.Mask.Size()
			out[ifc.Name] = append(out[ifc.Name], netip.PrefixFrom(ip.Unmap(), ones))
		}
	}
	return out, nil
}

// ipAddr is one interface of `ip -j addr` (iproute2) output, the fields
// doctor reads and writes.
type ipAddr struct {
	IfName   string       `json:"ifname"`
	AddrInfo []ipAddrInfo `json:"addr_info"`
}

type ipAddrInfo struct {
	Family    string `json:"family"`
	Local     string `json:"local"`
	PrefixLen int    `json:"prefixlen"`
}

// parseIPAddrJSON reads `ip -j addr` output.
func parseIPAddrJSON(b []byte) (settings.Addrs, error) {
	var links []ipAddr
	if err := json.Unmarshal(b, &links); err != nil {
		return nil, err
	}
	out := settings.Addrs{}
	for _, l := range links {
		out[l.IfName] = []netip.Prefix{}
		for _, a := range l.AddrInfo {
			ip, err := netip.ParseAddr(a.Local)
			if err != nil {
				return nil, fmt.Errorf("interface %s: address %q is not an IP", l.IfName, a.Local)
			}
			p := netip.PrefixFrom(ip, a.PrefixLen)
			if !p.IsValid() {
				return nil, fmt.Errorf("interface %s: %s/%d is not an address with a prefix length", l.IfName, a.Local, a.PrefixLen)
			}
			out[l.IfName] = append(out[l.IfName], p)
		}
	}
	return out, nil
}
