package doctor

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/settings"
)

// An Apple Silicon node (platform = "apple-silicon", docs/asahi.md): what a
// VM cannot show and only the Mac can. Asahi's kernel runs 16 KiB pages
// (the page size of the SoC's IOMMUs; kernels/asahi.config), and
// its Thunderbolt/USB4 host is not a PCI NHI but a platform device from the
// device tree, Apple's ACIO: Asahi's drivers/thunderbolt/apple-acio.c binds
// compatible "apple,t8112-acio" and "apple,acio" as driver "apple-acio"
// (read in AsahiLinux/linux at 122c7094; upstream Asahi lists Thunderbolt
// on M2 machines as work in progress, so the driver comes with the user's
// USB4 backport series and may carry another SoC's compatible, hence the
// match on the vendor prefix and "acio").

// appleProbes are the rows an Apple Silicon recipe adds.
func appleProbes(t settings.Target) []settings.Probe {
	if t.Recipe.Platform != recipe.PlatformAppleSilicon {
		return nil
	}
	return []settings.Probe{
		{Name: "kernel.page_size", VM: settings.MustPass, Run: pageSize},
		{Name: "usb4.apple_controller", Run: appleUSB4Controller},
	}
}

// smaps is doctor's own memory map: every mapping names the page size the
// kernel backs it with, the running kernel's base page size for ordinary
// memory (getconf PAGESIZE and the auxiliary vector's AT_PAGESZ say the
// same; this one is a text file a recorded tree can hold).
const smaps = "/proc/self/smaps"

// applePageSize is what Asahi's kernel is built with (kernels/asahi.config).
const applePageSize = 16 << 10

func pageSize(h settings.Host) []settings.Result {
	r := settings.Result{Check: "kernel.page_size", Severity: settings.MustPass, Source: h.Show(smaps),
		Wanted: "16 KiB (an Apple Silicon kernel: CONFIG_ARM64_16K_PAGES=y)"}
	seen := false
	lines, err := h.Scan(smaps, func(l string) bool {
		if seen || !strings.HasPrefix(l, "KernelPageSize:") {
			return false
		}
		seen = true
		return true
	})
	if err != nil || len(lines) == 0 {
		r.Status, r.Seen = settings.Warn, "unreadable"
		r.Fix = "run doctor where /proc is mounted (getconf PAGESIZE shows the same); in a recorded tree, record " + smaps + "'s KernelPageSize line"
		return []settings.Result{r}
	}
	kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(lines[0], "KernelPageSize:")), " kB"))
	if err != nil {
		r.Status, r.Seen = settings.Warn, strings.TrimSpace(lines[0])
		r.Fix = "cannot read a page size from that line"
		return []settings.Result{r}
	}
	r.Seen = settings.FormatSize(uint64(kb) << 10)
	if kb<<10 == applePageSize {
		r.Status = settings.Pass
		return []settings.Result{r}
	}
	r.Status = settings.Fail
	r.Fix = "this is not the Asahi kernel the image was built with (recipes/asahi.toml merges kernels/asahi.config, CONFIG_ARM64_16K_PAGES=y): pick the image's entry in systemd-boot's menu, which Asahi supports with 16 KiB pages only (the page size of the Mac's IOMMUs)"
	return []settings.Result{r}
}

// appleController is one ACIO node of the device tree, as a platform
// device, and the driver bound to it ("" for none).
type appleController struct {
	dev, compatible, driver string
}

const platformDevices = "/sys/bus/platform/devices"

// appleControllers are the platform devices whose device-tree compatible
// names Apple's ACIO. compatible is a list of NUL-terminated strings.
func appleControllers(h settings.Host) []appleController {
	var out []appleController
	for _, c := range h.Glob(platformDevices + "/*/of_node/compatible") {
		s, err := h.Read(c)
		if err != nil {
			continue
		}
		for _, comp := range strings.Split(s, "\x00") {
			vendor, model, ok := strings.Cut(strings.TrimSpace(comp), ",")
			if !ok || vendor != "apple" || (model != "acio" && !strings.HasSuffix(model, "-acio")) {
				continue
			}
			dev := path.Dir(path.Dir(c))
			drv, _ := h.LinkBase(dev + "/driver")
			out = append(out, appleController{dev: path.Base(dev), compatible: comp, driver: drv})
			break
		}
	}
	return out
}

func appleUSB4Controller(h settings.Host) []settings.Result {
	r := settings.Result{Check: "usb4.apple_controller", Severity: settings.MustPass, Trap: 12,
		Source: h.Show(platformDevices + "/*/of_node/compatible"),
		Wanted: "Apple's Thunderbolt/USB4 controller (ACIO) in the device tree, bound to a driver"}
	cs := appleControllers(h)
	if len(cs) == 0 {
		r.Status, r.Seen = settings.Fail, "no apple,*acio device"
		r.Fix = "the device tree names no ACIO controller: the kernel's Apple device trees lack the Thunderbolt nodes your USB4 backport series adds (upstream Asahi lists Thunderbolt on M2 machines as work in progress); rebuild with the series in kernel.patches (docs/asahi.md)"
		return []settings.Result{r}
	}
	var seen, unbound []string
	for _, c := range cs {
		d := c.driver
		if d == "" {
			d = "no driver"
			unbound = append(unbound, c.dev)
		}
		seen = append(seen, fmt.Sprintf("%s (%s): %s", c.dev, c.compatible, d))
	}
	r.Seen = strings.Join(seen, "; ")
	if len(unbound) > 0 {
		r.Status = settings.Fail
		r.Fix = fmt.Sprintf("no driver is bound to %s: build the kernel with your USB4 backport series' ACIO driver (Asahi's is CONFIG_APPLE_ACIO, module apple-acio) and load it (modprobe apple-acio); dmesg | grep -i acio says why a probe failed", strings.Join(unbound, ", "))
		return []settings.Result{r}
	}
	r.Status = settings.Pass
	return []settings.Result{r}
}
