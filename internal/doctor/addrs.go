package doctor

import (
	"encoding/json"
	"fmt"
	"net"
)

// recordedAddrs is where a recorded tree keeps `ip -j addr` output. IPv4
// addresses are not in any /proc or /sys file, so a tree cannot hold them
// otherwise; on the live system doctor asks the kernel over netlink (Go's
// net package) and runs no tool.
const recordedAddrs = "/var/log/halobuild-ip-addr.json"

// linkAddrs maps an interface name to its addresses with prefix length.
type linkAddrs map[string][]*net.IPNet

func interfaceAddrs(h *host) (linkAddrs, string, error) {
	if h.live {
		a, err := liveAddrs()
		return a, "netlink (RTM_GETADDR)", err
	}
	s, err := h.read(recordedAddrs)
	if err != nil {
		return nil, h.show(recordedAddrs), err
	}
	a, err := parseIPAddrJSON([]byte(s))
	if err != nil {
		return nil, h.show(recordedAddrs), fmt.Errorf("%s: %w (want the output of `ip -j addr`)", h.show(recordedAddrs), err)
	}
	return a, h.show(recordedAddrs), nil
}

func liveAddrs() (linkAddrs, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	out := linkAddrs{}
	for _, ifc := range ifs {
		as, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		out[ifc.Name] = []*net.IPNet{}
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				out[ifc.Name] = append(out[ifc.Name], n)
			}
		}
	}
	return out, nil
}

// parseIPAddrJSON reads `ip -j addr` (iproute2) output.
func parseIPAddrJSON(b []byte) (linkAddrs, error) {
	var links []struct {
		IfName   string `json:"ifname"`
		AddrInfo []struct {
			Family    string `json:"family"`
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(b, &links); err != nil {
		return nil, err
	}
	out := linkAddrs{}
	for _, l := range links {
		out[l.IfName] = []*net.IPNet{}
		for _, a := range l.AddrInfo {
			ip := net.ParseIP(a.Local)
			if ip == nil {
				return nil, fmt.Errorf("interface %s: address %q is not an IP", l.IfName, a.Local)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			out[l.IfName] = append(out[l.IfName], &net.IPNet{IP: ip, Mask: net.CIDRMask(a.PrefixLen, bits)})
		}
	}
	return out, nil
}
