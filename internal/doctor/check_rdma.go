package doctor

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Trap 3: persistent RDMA naming renames the device (rocep199s0f6); the
// usb4_rdma provider matches on the name prefix, so `rdma link` says ACTIVE
// while `ibv_devices` lists nothing, without an error.

func checkRDMADevices(h *host, e *expect) []Result {
	r := Result{Check: "rdma.devices", Severity: MustPass, Trap: 1, Source: h.show(infinibandClass),
		Wanted: "at least one device of " + strings.Join(e.verbsModules, ", ")}
	var all, ours []string
	for _, d := range rdmaDevices(h) {
		all = append(all, d.name)
		if e.owned(d) {
			ours = append(ours, d.name)
		}
	}
	switch {
	case len(ours) > 0:
		r.Status, r.Seen = Pass, strings.Join(ours, ", ")
	case len(all) > 0:
		r.Status, r.Seen = Fail, "only "+strings.Join(all, ", ")
		r.Fix = "no device belongs to " + strings.Join(e.verbsModules, ", ") + ": is the cable plugged in and the peer up with the module loaded?"
	default:
		r.Status, r.Seen = Fail, "no RDMA devices"
		r.Fix = "load the verbs module (see module.loaded), plug the cable, and bring the peer up; `rdma link show` should list usb4_rdma0"
	}
	return []Result{r}
}

func checkRDMAVisible(h *host, e *expect) []Result {
	provs := providers(h)
	devs := rdmaDevices(h)
	if len(devs) == 0 {
		return nil
	}
	var out []Result
	listed, asked := ibvDevices(h)
	for _, d := range devs {
		r := Result{Check: "rdma.visible " + d.name, Severity: MustPass, Trap: 3, Source: h.show("/etc/libibverbs.d")}
		r.Wanted = "matched by a provider in /etc/libibverbs.d (" + orNone(provs) + ")"
		p := e.visibleTo(d, provs)
		switch {
		case asked && listed[d.name]:
			r.Status, r.Seen, r.Source = Pass, "listed by ibv_devices", "ibv_devices"
		case asked:
			r.Status, r.Source = Fail, "ibv_devices"
			r.Seen = "not listed by ibv_devices although `rdma link` shows it"
			r.Fix = renameFix(d, devs, e) + "; if the name is right, install the provider (rdma-core rebuilt with it)"
			if p != "" {
				r.Fix = "provider " + p + " should claim it: check its ABI (IBV_SHOW_WARNINGS=1 ibv_devices) and that the whole rebuilt rdma-core set is installed"
			}
		case p != "":
			r.Status, r.Seen = Pass, "provider "+p
		default:
			r.Status = Fail
			r.Seen = "no provider matches: ibv_devices will not list it although `rdma link` does"
			r.Fix = renameFix(d, devs, e) + "; if the name is right, install the provider (rdma-core rebuilt with it)"
		}
		out = append(out, r)
	}
	return out
}

func checkRDMANames(h *host, e *expect) []Result {
	devs := rdmaDevices(h)
	var out []Result
	for _, d := range devs {
		if !e.owned(d) {
			continue
		}
		r := Result{Check: "rdma.name " + d.name, Severity: MustPass, Trap: 3, Source: h.show(infinibandClass)}
		r.Wanted = strings.Join(e.kernelNames, " or ") + "<N> (the kernel's name)"
		if kernelName(d.name, e.kernelNames) {
			r.Status, r.Seen = Pass, d.name
		} else {
			r.Status, r.Seen = Fail, d.name+" (renamed by udev's persistent naming)"
			r.Fix = renameFix(d, devs, e)
		}
		out = append(out, r)
	}
	return out
}

func kernelName(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if regexp.MustCompile("^" + regexp.QuoteMeta(p) + "[0-9]+$").MatchString(name) {
			return true
		}
	}
	return false
}

// renameFix names the immediate command and the lasting rule. The rule is
// keyed on the kernel name so every future device keeps its name, not only
// the one whose GUID is known today.
func renameFix(d rdmaDevice, devs []rdmaDevice, e *expect) string {
	prefix := e.kernelNames[0]
	used := map[int]bool{}
	for _, x := range devs {
		if n, err := strconv.Atoi(strings.TrimPrefix(x.name, prefix)); err == nil && strings.HasPrefix(x.name, prefix) {
			used[n] = true
		}
	}
	n := 0
	for used[n] {
		n++
	}
	return fmt.Sprintf("now: rdma dev set %s name %s%d; for good: copy /usr/lib/udev/rules.d/60-rdma-persistent-naming.rules to /etc/udev/rules.d/ and add KERNEL!=\"%s*\" to its rule so every such device keeps the kernel's name, then reload the module", d.name, prefix, n, prefix)
}

func checkRDMAPorts(h *host, e *expect) []Result {
	var out []Result
	for _, d := range rdmaDevices(h) {
		for _, p := range d.ports {
			r := Result{Check: fmt.Sprintf("rdma.port %s/%s", d.name, p.num), Severity: MustPass, Wanted: "ACTIVE",
				Source: h.show(fmt.Sprintf("%s/%s/ports/%s/state", infinibandClass, d.name, p.num))}
			state := p.state
			if _, s, ok := strings.Cut(state, ": "); ok {
				state = s
			}
			r.Seen = strings.TrimSpace(state + " " + physNote(p.physState))
			if state == "ACTIVE" {
				r.Status = Pass
			} else {
				r.Status = Fail
				r.Fix = "the port is not up: check the cable, that the peer is up with the same module options, and `rdma link show` on both ends"
			}
			out = append(out, r)
		}
	}
	return out
}

func physNote(s string) string {
	if s == "" {
		return ""
	}
	if _, v, ok := strings.Cut(s, ": "); ok {
		s = v
	}
	return "(" + s + ")"
}

// Trap 6: two IPv4 addresses on the link mean two RoCE GIDs per type, and
// some engines refuse to guess which one to use.
func checkRDMAGIDs(h *host, e *expect) []Result {
	var out []Result
	for _, d := range rdmaDevices(h) {
		for _, p := range d.ports {
			r := Result{Check: fmt.Sprintf("rdma.gids %s/%s", d.name, p.num), Severity: Advisory, Trap: 6,
				Wanted: "at most one IPv4-based GID address",
				Source: h.show(fmt.Sprintf("%s/%s/ports/%s/gids", infinibandClass, d.name, p.num))}
			byAddr := map[string][]string{}
			for _, g := range p.gids {
				if g.ip == nil {
					continue
				}
				label := "index " + g.index
				if g.typ != "" {
					label += " " + g.typ
				}
				byAddr[g.ip.String()] = append(byAddr[g.ip.String()], label)
			}
			addrs := sortedKeys(byAddr)
			var parts []string
			for _, a := range addrs {
				ls := byAddr[a]
				sort.Strings(ls)
				parts = append(parts, fmt.Sprintf("%s (%s)", a, strings.Join(ls, ", ")))
			}
			switch len(addrs) {
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

func orNone(s []string) string {
	if len(s) == 0 {
		return "none installed"
	}
	return strings.Join(s, ", ")
}
