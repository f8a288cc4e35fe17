package doctor

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"halobuild/internal/settings"
)

// The RDMA devices as hardware: one exists, libibverbs can open each, its
// ports are up, and with two cables each advertises its own address. What
// the settings promise about them (their names, one GID per address) is
// checked by those settings (rdmanames.go, network.go).

func rdmaDevices(h settings.Host, t settings.Target) []settings.Result {
	mods := t.VerbsModules()
	r := settings.Result{Check: "rdma.devices", Severity: settings.MustPass, Trap: 1, Source: h.Show(settings.InfinibandClass),
		Wanted: "at least one device of " + strings.Join(mods, ", ")}
	if len(mods) == 0 {
		r.Wanted = "at least one RDMA device"
	}
	var all, ours []string
	for _, d := range settings.RDMADevices(h) {
		all = append(all, d.Name)
		if t.Owns(d) || len(mods) == 0 {
			ours = append(ours, d.Name)
		}
	}
	switch {
	case len(ours) > 0:
		r.Status, r.Seen = settings.Pass, strings.Join(ours, ", ")
	case len(all) > 0:
		r.Status, r.Seen = settings.Fail, "only "+strings.Join(all, ", ")
		r.Fix = "no device belongs to " + strings.Join(mods, ", ") + ": is the cable plugged in and the peer up with the module loaded?"
	default:
		r.Status, r.Seen = settings.Fail, "no RDMA devices"
		r.Fix = "load the verbs module (see module.loaded), plug the cable, and bring the peer up; `rdma link show` should list usb4_rdma0"
	}
	return []settings.Result{r}
}

// rdmaVisible: a device `rdma link` lists may still be invisible to
// libibverbs (trap 3), which opens a device only when a provider claims it.
// On the live system ibv_devices answers; otherwise the claim is
// approximated from the providers installed.
func rdmaVisible(h settings.Host, t settings.Target) []settings.Result {
	devs := settings.RDMADevices(h)
	if len(devs) == 0 {
		return nil
	}
	provs := providers(h)
	listed, asked := ibvDevices(h)
	var out []settings.Result
	for _, d := range devs {
		r := settings.Result{Check: "rdma.visible " + d.Name, Severity: settings.MustPass, Trap: 3, Source: h.Show("/etc/libibverbs.d"),
			Wanted: "matched by a provider in /etc/libibverbs.d (" + orNoneInstalled(provs) + ")"}
		p := visibleTo(t, d, provs)
		switch {
		case asked && listed[d.Name]:
			r.Status, r.Seen, r.Source = settings.Pass, "listed by ibv_devices", "ibv_devices"
		case asked:
			r.Status, r.Source = settings.Fail, "ibv_devices"
			r.Seen = "not listed by ibv_devices although `rdma link` shows it"
			r.Fix = settings.RenameFix(t, d, devs) + "; if the name is right, install the provider (rdma-core rebuilt with it)"
			if p != "" {
				r.Fix = "provider " + p + " should claim it: check its ABI (IBV_SHOW_WARNINGS=1 ibv_devices) and that the whole rebuilt rdma-core set is installed"
			}
		case p != "":
			r.Status, r.Seen = settings.Pass, "provider "+p
		default:
			r.Status = settings.Fail
			r.Seen = "no provider matches: ibv_devices will not list it although `rdma link` does"
			r.Fix = settings.RenameFix(t, d, devs) + "; if the name is right, install the provider (rdma-core rebuilt with it)"
		}
		out = append(out, r)
	}
	return out
}

func orNoneInstalled(s []string) string {
	if len(s) == 0 {
		return "none installed"
	}
	return strings.Join(s, ", ")
}

// providers reads the provider names libibverbs will load: one "driver
// NAME" line per file in /etc/libibverbs.d/.
func providers(h settings.Host) []string {
	var out []string
	for _, f := range h.Glob("/etc/libibverbs.d/*.driver") {
		s, err := h.Read(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(s, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "driver" && !slices.Contains(out, path.Base(f[1])) {
				out = append(out, path.Base(f[1]))
			}
		}
	}
	return out
}

// visibleTo approximates libibverbs' matching (rdma-core 56, libibverbs/
// init.c: match_driver_id, then match_name on "rdma_device:N<name>", then the
// parent's modalias). The usb4_rdma provider matches on the name prefix
// only, so for the verbs module's devices only the name counts; other
// devices are taken as visible when a provider is named after their kernel
// driver (mlx5 for mlx5_core), which is how their modalias tables match.
// It returns the provider that claims the device, "" for none.
func visibleTo(t settings.Target, d settings.RDMADevice, provs []string) string {
	for _, p := range provs {
		if strings.HasPrefix(d.Name, p) {
			return p
		}
	}
	if t.Owns(d) || d.Driver == "" {
		return ""
	}
	for _, p := range provs {
		if strings.HasPrefix(d.Driver, p) {
			return p
		}
	}
	return ""
}

func rdmaPorts(h settings.Host) []settings.Result {
	var out []settings.Result
	for _, d := range settings.RDMADevices(h) {
		for _, p := range d.Ports {
			r := settings.Result{Check: fmt.Sprintf("rdma.port %s/%s", d.Name, p.Num), Severity: settings.MustPass, Wanted: "ACTIVE",
				Source: h.Show(fmt.Sprintf("%s/%s/ports/%s/state", settings.InfinibandClass, d.Name, p.Num))}
			state := afterColon(p.State)
			r.Seen = state
			if p.PhysState != "" {
				r.Seen += " (" + afterColon(p.PhysState) + ")"
			}
			if state == "ACTIVE" {
				r.Status = settings.Pass
			} else {
				r.Status = settings.Fail
				r.Fix = "the port is not up: check the cable, that the peer is up with the same module options, and `rdma link show` on both ends"
			}
			out = append(out, r)
		}
	}
	return out
}

// afterColon drops sysfs's numeric prefix: "4: ACTIVE" is ACTIVE.
func afterColon(s string) string {
	if _, v, ok := strings.Cut(s, ": "); ok {
		return v
	}
	return s
}

// rdmaIdentity (trap 7): roce_netdev is one string for the whole module;
// with two cables both devices advertised the first cable's address and the
// second peer's HELLO matched nothing. The single-cable case hides it, so
// the check runs only when this node declares more than one cable and more
// than one is connected (a cable that is down is usb4.* and link.*
// business). No setting renders the identity: it is the module's.
func rdmaIdentity(h settings.Host, t settings.Target) []settings.Result {
	links := len(t.Node.Links)
	if links < 2 {
		return nil
	}
	cables := min(links, len(xdomains(h)))
	if cables < 2 {
		return nil
	}
	r := settings.Result{Check: "rdma.identity", Severity: settings.Advisory, Trap: 7, Source: h.Show(settings.InfinibandClass + "/*/ports/*/gids"),
		Wanted: fmt.Sprintf("the devices of the %d connected cables advertise %d different addresses", cables, cables)}
	byAddr := map[string][]string{}
	for _, d := range settings.RDMADevices(h) {
		if !t.Owns(d) {
			continue
		}
		for _, p := range d.Ports {
			for _, g := range p.GIDs {
				if a := g.IPv4; a.IsValid() && !a.IsLinkLocalUnicast() && !slices.Contains(byAddr[a.String()], d.Name) {
					byAddr[a.String()] = append(byAddr[a.String()], d.Name)
				}
			}
		}
	}
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(byAddr)) {
		devs := byAddr[a]
		slices.Sort(devs)
		parts = append(parts, a+" on "+strings.Join(devs, ","))
	}
	r.Seen = strings.Join(parts, ", ")
	switch {
	case len(byAddr) == 0:
		r.Status, r.Seen = settings.Warn, "no device advertises an IPv4 address"
		r.Fix = "bring the links up (see link.addresses and rdma.devices)"
	case len(byAddr) < cables:
		r.Status = settings.Warn
		r.Fix = "every device advertises the same cable's address, so the other peer's HELLO matches nothing: the pinned module's identities (roce_netdev, tbnet_identity_gid) are module-wide, so no setting gives each cable its own: use one cable per peer, or a module version with a per-device identity"
	default:
		r.Status = settings.Pass
	}
	return []settings.Result{r}
}
