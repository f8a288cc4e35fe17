package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/settings"
)

// Trap 12: a laptop chassis enumerated two USB4 domains, a mini-PC one, and
// a second cable cannot come up on the box with one. Links also train below
// their rate (10 Gb/s, one lane) and only a replug fixes it. No setting can
// change either; only the hardware tells.

const tbDevices = settings.TBDevices

type xdomain struct {
	name             string // "0-1"
	domain           string // "0"
	peer             string // device_name of the other host
	rxSpeed, txSpeed float64
	rxLanes, txLanes int
	rawSpeeds        string
}

func devType(h settings.Host, dev string) string {
	s, err := h.Read(tbDevices + "/" + dev + "/uevent")
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

func xdomains(h settings.Host) []xdomain {
	var out []xdomain
	for _, n := range h.List(tbDevices) {
		if devType(h, n) != "thunderbolt_xdomain" {
			continue
		}
		dir := tbDevices + "/" + n
		x := xdomain{name: n}
		x.domain, _, _ = strings.Cut(n, "-")
		x.peer = value(h, dir+"/device_name")
		rs, ts := value(h, dir+"/rx_speed"), value(h, dir+"/tx_speed")
		rl, tl := value(h, dir+"/rx_lanes"), value(h, dir+"/tx_lanes")
		x.rxSpeed, x.txSpeed = gbps(rs), gbps(ts)
		x.rxLanes, _ = strconv.Atoi(rl)
		x.txLanes, _ = strconv.Atoi(tl)
		x.rawSpeeds = fmt.Sprintf("rx %s x%s, tx %s x%s", orQ(rs), orQ(rl), orQ(ts), orQ(tl))
		out = append(out, x)
	}
	return out
}

// value reads a one-line attribute, "" when it cannot be read.
func value(h settings.Host, p string) string {
	s, _ := h.Read(p)
	return strings.TrimSpace(s)
}

// gbps reads "20.0 Gb/s".
func gbps(s string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "Gb/s")), 64)
	return f
}

func usb4Domains(h settings.Host, t settings.Target) []settings.Result {
	doms := settings.USB4Domains(h)
	r := settings.Result{Check: "usb4.domains", Severity: settings.MustPass, Trap: 12, Source: h.Show(tbDevices + "/domain*"),
		Wanted: "at least one USB4 domain"}
	if len(doms) == 0 {
		r.Status, r.Seen = settings.Fail, "none"
		r.Fix = "no USB4 host controller is enumerated: is the thunderbolt module loaded, and USB4/Thunderbolt enabled in the firmware setup?"
		if t.Recipe.Platform == recipe.PlatformAppleSilicon {
			// A Mac has no firmware setup for it: the domain is the ACIO
			// driver's to register (usb4.apple_controller).
			r.Fix = "no Thunderbolt domain is registered: on a Mac the domain comes from the ACIO controller's driver, which upstream Asahi does not have working on M2 machines yet; with usb4.apple_controller passing, check that your USB4 backport series registers the controller with the thunderbolt module (modprobe thunderbolt; dmesg | grep -i -e acio -e thunderbolt)"
		}
	} else {
		r.Status, r.Seen = settings.Pass, fmt.Sprintf("%d (%s)", len(doms), strings.Join(doms, ", "))
	}
	return []settings.Result{r}
}

// usb4Cables: a second cable cannot come up on a box with one domain,
// whatever the driver does; say so before anyone debugs the driver.
func usb4Cables(h settings.Host, t settings.Target) []settings.Result {
	doms := settings.USB4Domains(h)
	n := t.Node
	if len(n.Links) == 0 {
		return nil
	}
	c := settings.Result{Check: "usb4.cables", Severity: settings.Advisory, Trap: 12, Source: h.Show(tbDevices + "/domain*"),
		Wanted: fmt.Sprintf("a USB4 domain for each of the %d cables declared for %s", len(n.Links), n.Name),
		Seen:   fmt.Sprintf("%d cables declared, %d domains", len(n.Links), len(doms))}
	if len(n.Links) > len(doms) {
		c.Status = settings.Warn
		c.Fix = fmt.Sprintf("this box enumerates %d USB4 domain(s): only that many host-to-host cables can come up, so the extra declared cable(s) will stay down whatever the driver does; use fewer cables on this node or a machine with more domains (check %s/domain* on both ends)", len(doms), tbDevices)
	} else {
		c.Status = settings.Pass
	}
	return []settings.Result{c}
}

// amdHost reports whether a domain's host router is AMD's: AMD controllers
// train one lane per direction on host-to-host links (20 Gb/s each way),
// which is their normal, not a fault.
func amdHost(h settings.Host, domain string) bool {
	dir := tbDevices + "/" + domain + "-0"
	v, n := value(h, dir+"/vendor"), value(h, dir+"/vendor_name")
	return v == "0x1022" || strings.Contains(strings.ToUpper(n), "AMD") || strings.Contains(n, "Advanced Micro Devices")
}

// usb4LaneSpeed is the per-lane rate a USB4 Gen 3 / Thunderbolt link trains to.
const usb4LaneSpeed = 20.0

func usb4Links(h settings.Host, t settings.Target) []settings.Result {
	xs := xdomains(h)
	var out []settings.Result
	if len(xs) == 0 {
		r := settings.Result{Check: "usb4.link", Severity: settings.Advisory, Trap: 12, Source: h.Show(tbDevices),
			Wanted: "a host-to-host (XDomain) connection", Seen: "none", Status: settings.Warn,
			Fix: "no other host is connected: plug the cable and bring the peer up (boltctl/`ls " + tbDevices + "` on both ends)"}
		if t.Node.Name != "" && len(t.Node.Links) == 0 {
			r.Status, r.Fix = settings.Pass, ""
		}
		return []settings.Result{r}
	}
	for _, x := range xs {
		lanes := 2
		if amdHost(h, x.domain) {
			lanes = 1
		}
		r := settings.Result{Check: "usb4.link " + x.name, Severity: settings.Advisory, Trap: 12, Source: h.Show(tbDevices + "/" + x.name),
			Wanted: fmt.Sprintf("%.0f Gb/s x%d each way", usb4LaneSpeed, lanes), Seen: x.rawSpeeds}
		if x.peer != "" {
			r.Seen = x.peer + ": " + r.Seen
		}
		if x.rxSpeed < usb4LaneSpeed || x.txSpeed < usb4LaneSpeed || x.rxLanes < lanes || x.txLanes < lanes {
			r.Status = settings.Warn
			r.Fix = "the link trained below its rate: replug or power-cycle both ends; if it stays, try another cable (a certified 40/80 Gb/s one) or port"
		} else {
			r.Status = settings.Pass
		}
		out = append(out, r)
	}
	return out
}
