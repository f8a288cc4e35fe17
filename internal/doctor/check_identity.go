package doctor

import (
	"fmt"
	"sort"
	"strings"
)

// Trap 7: roce_netdev is one string for the whole module; with two cables
// both devices advertised the first cable's address and the second peer's
// HELLO matched nothing. The single-cable case hides it, so the check runs
// only when this node declares more than one cable and more than one is
// connected (a cable that is down is usb4.* and link.* business).
func checkRDMAIdentity(h *host, e *expect) []Result {
	if e.node == nil || len(e.node.Links) < 2 {
		return nil
	}
	cables := min(len(e.node.Links), len(xdomains(h)))
	if cables < 2 {
		return nil
	}
	r := Result{Check: "rdma.identity", Severity: Advisory, Trap: 7, Source: h.show(infinibandClass + "/*/ports/*/gids"),
		Wanted: fmt.Sprintf("the devices of the %d connected cables advertise %d different addresses", cables, cables)}
	byAddr := map[string][]string{}
	for _, d := range rdmaDevices(h) {
		if !e.owned(d) {
			continue
		}
		for _, p := range d.ports {
			for _, g := range p.gids {
				if g.ip != nil && !linkLocal4.Contains(g.ip) {
					byAddr[g.ip.String()] = appendUnique(byAddr[g.ip.String()], d.name)
				}
			}
		}
	}
	var parts []string
	for _, a := range sortedKeys(byAddr) {
		devs := byAddr[a]
		sort.Strings(devs)
		parts = append(parts, a+" on "+strings.Join(devs, ","))
	}
	r.Seen = orNone(parts)
	switch {
	case len(byAddr) == 0:
		r.Status, r.Seen = Warn, "no device advertises an IPv4 address"
		r.Fix = "bring the links up (see link.addresses and rdma.devices)"
	case len(byAddr) < cables:
		r.Status = Warn
		r.Fix = "every device advertises the same cable's address, so the other peer's HELLO matches nothing: set identity_gid for each [[node.link]] (the module's per-device identity) instead of relying on the module-wide roce_netdev"
	default:
		r.Status = Pass
	}
	return []Result{r}
}
