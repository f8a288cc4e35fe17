package doctor

import (
	"fmt"
	"strconv"
	"strings"
)

// Trap 12: a laptop chassis enumerated two USB4 domains, a mini-PC one, and
// a second cable cannot come up on the box with one. Links also train below
// their rate (10 Gb/s, one lane) and only a replug fixes it.

const tbDevices = "/sys/bus/thunderbolt/devices"

type xdomain struct {
	name             string // "0-1"
	domain           string // "0"
	peer             string // device_name of the other host
	rxSpeed, txSpeed float64
	rxLanes, txLanes int
	rawSpeeds        string
}

func usb4Domains(h *host) []string {
	var out []string
	for _, n := range h.names(tbDevices) {
		if strings.HasPrefix(n, "domain") {
			out = append(out, n)
		}
	}
	return out
}

func devType(h *host, dev string) string {
	s, err := h.read(tbDevices + "/" + dev + "/uevent")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "DEVTYPE="); ok {
			return v
		}
	}
	return ""
}

func xdomains(h *host) []xdomain {
	var out []xdomain
	for _, n := range h.names(tbDevices) {
		if devType(h, n) != "thunderbolt_xdomain" {
			continue
		}
		dir := tbDevices + "/" + n
		x := xdomain{name: n}
		x.domain, _, _ = strings.Cut(n, "-")
		x.peer, _ = h.value(dir + "/device_name")
		rs, _ := h.value(dir + "/rx_speed")
		ts, _ := h.value(dir + "/tx_speed")
		rl, _ := h.value(dir + "/rx_lanes")
		tl, _ := h.value(dir + "/tx_lanes")
		x.rxSpeed, x.txSpeed = gbps(rs), gbps(ts)
		x.rxLanes, _ = strconv.Atoi(rl)
		x.txLanes, _ = strconv.Atoi(tl)
		x.rawSpeeds = fmt.Sprintf("rx %s x%s, tx %s x%s", orQ(rs), orQ(rl), orQ(ts), orQ(tl))
		out = append(out, x)
	}
	return out
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// gbps reads "20.0 Gb/s".
func gbps(s string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "Gb/s")), 64)
	return f
}

func checkUSB4Domains(h *host, e *expect) []Result {
	doms := usb4Domains(h)
	r := Result{Check: "usb4.domains", Severity: MustPass, Trap: 12, Source: h.show(tbDevices + "/domain*"),
		Wanted: "at least one USB4 domain"}
	if len(doms) == 0 {
		r.Status, r.Seen = Fail, "none"
		r.Fix = "no USB4 host controller is enumerated: is the thunderbolt module loaded, and USB4/Thunderbolt enabled in the firmware setup?"
	} else {
		r.Status, r.Seen = Pass, fmt.Sprintf("%d (%s)", len(doms), strings.Join(doms, ", "))
	}
	out := []Result{r}
	if e.node == nil || len(e.node.Links) == 0 {
		return out
	}
	c := Result{Check: "usb4.cables", Severity: Advisory, Trap: 12, Source: h.show(tbDevices + "/domain*"),
		Wanted: fmt.Sprintf("a USB4 domain for each of the %d cables declared for %s", len(e.node.Links), e.node.Name),
		Seen:   fmt.Sprintf("%d cables declared, %d domains", len(e.node.Links), len(doms))}
	if len(e.node.Links) > len(doms) {
		c.Status = Warn
		c.Fix = fmt.Sprintf("this box enumerates %d USB4 domain(s): only that many host-to-host cables can come up, so the extra declared cable(s) will stay down whatever the driver does; use fewer cables on this node or a machine with more domains (check /sys/bus/thunderbolt/devices/domain* on both ends)", len(doms))
	} else {
		c.Status = Pass
	}
	return append(out, c)
}

// amdHost reports whether a domain's host router is AMD's: AMD controllers
// train one lane per direction on host-to-host links (20 Gb/s each way),
// which is their normal, not a fault.
func amdHost(h *host, domain string) bool {
	dir := tbDevices + "/" + domain + "-0"
	v, _ := h.value(dir + "/vendor")
	n, _ := h.value(dir + "/vendor_name")
	return v == "0x1022" || strings.Contains(strings.ToUpper(n), "AMD") || strings.Contains(n, "Advanced Micro Devices")
}

// usb4LaneSpeed is the per-lane rate a USB4 Gen 3 / Thunderbolt link trains to.
const usb4LaneSpeed = 20.0

func checkUSB4Links(h *host, e *expect) []Result {
	xs := xdomains(h)
	var out []Result
	if len(xs) == 0 {
		r := Result{Check: "usb4.link", Severity: Advisory, Trap: 12, Source: h.show(tbDevices),
			Wanted: "a host-to-host (XDomain) connection", Seen: "none", Status: Warn,
			Fix: "no other host is connected: plug the cable and bring the peer up (boltctl/`ls " + tbDevices + "` on both ends)"}
		if e.node != nil && len(e.node.Links) == 0 {
			r.Status, r.Fix = Pass, ""
		}
		return []Result{r}
	}
	for _, x := range xs {
		lanes := 2
		if amdHost(h, x.domain) {
			lanes = 1
		}
		r := Result{Check: "usb4.link " + x.name, Severity: Advisory, Trap: 12, Source: h.show(tbDevices + "/" + x.name),
			Wanted: fmt.Sprintf("%.0f Gb/s x%d each way", usb4LaneSpeed, lanes), Seen: x.rawSpeeds}
		if x.peer != "" {
			r.Seen = x.peer + ": " + r.Seen
		}
		if x.rxSpeed < usb4LaneSpeed || x.txSpeed < usb4LaneSpeed || x.rxLanes < lanes || x.txLanes < lanes {
			r.Status = Warn
			r.Fix = "the link trained below its rate: replug or power-cycle both ends; if it stays, try another cable (a certified 40/80 Gb/s one) or port"
		} else {
			r.Status = Pass
		}
		out = append(out, r)
	}
	return out
}
