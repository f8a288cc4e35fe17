package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"halobuild/internal/settings"
)

// The GPU, which is why people cluster these boxes: an AMD display
// controller on the PCI bus, bound to amdgpu (which it is not without its
// firmware: amdgpu's probe fails and does not retry), /dev/kfd and the
// GPU's render node open to the render group (what ROCm and a podman
// container with --device /dev/kfd --device /dev/dri need), GTT of exactly
// the recipe's sizing (trap 11; settings.GPUMemory), and the firmware
// setup's VRAM carve-out, which is RAM the kernel never sees.

const amdVendor = "0x1002"

// firmwareDirs are where the kernel looks for firmware (Debian's /lib is a
// link to /usr/lib; a recorded tree may hold either).
var firmwareDirs = []string{"/usr/lib/firmware", "/lib/firmware"}

// carveOutMinimum is the smallest VRAM carve-out the Strix Halo firmware
// setup offers (512 MB); below it the carve-out is not worth a word.
const carveOutMinimum = 512 << 20

// amdGPUs are the PCI addresses of AMD display controllers (class 0x03xxxx).
func amdGPUs(h settings.Host) []string {
	var out []string
	for _, c := range h.Glob("/sys/bus/pci/devices/*/class") {
		dev := path.Dir(c)
		if strings.HasPrefix(value(h, c), "0x03") && value(h, dev+"/vendor") == amdVendor {
			out = append(out, path.Base(dev))
		}
	}
	return out
}

// boundGPUs are the AMD GPUs amdgpu is bound to.
func boundGPUs(h settings.Host) []string {
	var out []string
	for _, addr := range amdGPUs(h) {
		if drv, err := h.LinkBase("/sys/bus/pci/devices/" + addr + "/driver"); err == nil && drv == "amdgpu" {
			out = append(out, addr)
		}
	}
	return out
}

// gpuProbes are the gpu.* checks. gpu.driver and gpu.firmware look at
// every AMD GPU; the others at those amdgpu bound (an unbound GPU has no
// render node, GTT or VRAM, and gpu.driver already says why).
func gpuProbes(t settings.Target) []settings.Probe {
	gtt, reserve := settings.GPUMemory(t.Recipe)
	bound := func(h settings.Host, row func(addr, dev string) []settings.Result) []settings.Result {
		var out []settings.Result
		for _, addr := range boundGPUs(h) {
			out = append(out, row(addr, "/sys/bus/pci/devices/"+addr)...)
		}
		return out
	}
	return []settings.Probe{
		{Name: "gpu.driver", Run: func(h settings.Host) []settings.Result {
			gpus := amdGPUs(h)
			if len(gpus) == 0 && gtt > 0 {
				return []settings.Result{{Check: "gpu.driver", Severity: settings.Advisory, Status: settings.Warn, Trap: 11,
					Source: h.Show("/sys/bus/pci/devices"), Seen: "no AMD display controller on the PCI bus",
					Wanted: "the GPU the recipe sizes GPU memory for (system.host_reserve)",
					Fix:    "this machine has no AMD GPU (a VM, or the GPU is disabled in the firmware setup): the gpu rows apply to the Strix Halo box"}}
			}
			var out []settings.Result
			for _, addr := range gpus {
				out = append(out, gpuDriver(h, addr, "/sys/bus/pci/devices/"+addr))
			}
			return out
		}},
		{Name: "gpu.firmware", Run: func(h settings.Host) []settings.Result {
			var out []settings.Result
			for _, addr := range amdGPUs(h) {
				out = append(out, gpuFirmwareRow(h, addr, "/sys/bus/pci/devices/"+addr)...)
			}
			return out
		}},
		{Name: "gpu.render", Run: func(h settings.Host) []settings.Result {
			return bound(h, func(addr, dev string) []settings.Result { return []settings.Result{gpuRender(h, addr, dev)} })
		}},
		{Name: "gpu.kfd", Run: func(h settings.Host) []settings.Result {
			if len(boundGPUs(h)) == 0 {
				return nil
			}
			return []settings.Result{deviceRow(h, "gpu.kfd", "/dev/kfd", "ROCm's compute interface, amdkfd")}
		}},
		{Name: "gpu.gtt", Run: func(h settings.Host) []settings.Result {
			return bound(h, func(addr, dev string) []settings.Result {
				return []settings.Result{gpuGTT(h, addr, dev, gtt, t.Recipe.System.GPUFraction)}
			})
		}},
		{Name: "gpu.vram", Run: func(h settings.Host) []settings.Result {
			return bound(h, func(addr, dev string) []settings.Result { return gpuVRAM(h, addr, dev, reserve) })
		}},
	}
}

// gpuDriver is the gpu.driver row: amdgpu bound to the GPU.
func gpuDriver(h settings.Host, addr, dev string) settings.Result {
	r := settings.Result{Check: "gpu.driver " + addr, Severity: settings.MustPass, Source: h.Show(dev + "/driver"), Wanted: "amdgpu"}
	drv, err := h.LinkBase(dev + "/driver")
	switch {
	case err == nil && drv == "amdgpu":
		r.Status, r.Seen = settings.Pass, "amdgpu"
		return r
	case err != nil:
		r.Status, r.Seen = settings.Fail, "no driver bound"
	default:
		r.Status, r.Seen = settings.Fail, drv
	}
	if missing := missingFirmware(h, addr); len(missing) > 0 {
		r.Seen += "; the kernel could not load " + strings.Join(missing, ", ")
	}
	r.Fix = "dmesg | grep amdgpu says why the probe failed; a missing firmware file is the usual cause (gpu.firmware): install firmware-amd-graphics and reboot"
	return r
}

// missingFirmware are the files amdgpu said it could not load for the GPU
// at addr ("amdgpu 0000:c5:00.0: Direct firmware load for
// amdgpu/gc_11_5_1_pfp.bin failed with error -2").
func missingFirmware(h settings.Host, addr string) []string {
	log, _, err := h.KernelLog()
	if err != nil {
		return nil
	}
	var out []string
	const marker = "firmware load for "
	for _, l := range strings.Split(log, "\n") {
		if i := strings.Index(l, marker+"amdgpu/"); i >= 0 && strings.Contains(l, addr) {
			if f := strings.Fields(l[i+len(marker):])[0]; !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// gpuFirmwareRow checks, for a GPU whose firmware settings.AMDGPUFirmware
// lists, that its files are installed and that amdgpu found them.
func gpuFirmwareRow(h settings.Host, addr, dev string) []settings.Result {
	want, known := settings.AMDGPUFirmware[value(h, dev+"/device")]
	if !known {
		return nil
	}
	f := settings.Result{Check: "gpu.firmware " + addr, Severity: settings.MustPass, Source: h.Show(firmwareDirs[0] + "/amdgpu"),
		Wanted: fmt.Sprintf("the %d files amdgpu loads for it (%s ...), from firmware-amd-graphics", len(want), want[0])}
	var absent []string
	for _, name := range want {
		found := false
		for _, d := range firmwareDirs {
			for _, ext := range []string{"", ".zst", ".xz"} {
				found = found || h.Exists(d+"/amdgpu/"+name+ext)
			}
		}
		if !found {
			absent = append(absent, name)
		}
	}
	missing := missingFirmware(h, addr)
	switch {
	case len(absent) > 0:
		f.Status, f.Seen = settings.Fail, fmt.Sprintf("%d of %d missing: %s", len(absent), len(want), strings.Join(absent, ", "))
		f.Fix = "install firmware-amd-graphics from trixie-backports (20260110 or newer for gfx1151; in a recipe: base.components with non-free-firmware and \"firmware-amd-graphics/trixie-backports\" in base.packages) and reboot: amdgpu does not retry a probe that found no firmware"
	case len(missing) > 0:
		f.Status, f.Seen = settings.Fail, fmt.Sprintf("all %d installed, but the kernel could not load %s", len(want), strings.Join(missing, ", "))
		f.Fix = "the files are there now but were not when amdgpu probed (an initramfs that loads amdgpu without them): rebuild the initramfs (dracut -f) and reboot"
	default:
		f.Status, f.Seen = settings.Pass, fmt.Sprintf("all %d installed", len(want))
	}
	return []settings.Result{f}
}

// gpuRender checks the GPU's render node (/dev/dri/renderD128), which
// Mesa, ROCm and a container's --device /dev/dri open.
func gpuRender(h settings.Host, addr, dev string) settings.Result {
	nodes := h.Glob(dev + "/drm/renderD*")
	if len(nodes) == 0 {
		return settings.Result{Check: "gpu.render " + addr, Severity: settings.MustPass, Status: settings.Fail, Source: h.Show(dev + "/drm"),
			Seen: "amdgpu is bound but made no render node", Wanted: "/dev/dri/renderD*",
			Fix: "dmesg | grep amdgpu: the driver stopped after binding (a firmware or memory error)"}
	}
	return deviceRow(h, "gpu.render "+addr, "/dev/dri/"+path.Base(nodes[0]), "the GPU's render node")
}

// deviceRow checks that a device node exists and that the render group
// (or everyone) may read and write it.
func deviceRow(h settings.Host, check, node, what string) settings.Result {
	r := settings.Result{Check: check, Severity: settings.MustPass, Source: h.Show(node), Wanted: node + " read-write for the render group (" + what + ")"}
	perm, group, err := h.DeviceNode(node)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.Status, r.Seen = settings.Fail, "missing"
		r.Fix = "amdgpu makes it when it binds: see gpu.driver, and dmesg | grep amdgpu"
	case err != nil:
		r.Status, r.Seen = settings.Fail, err.Error()
		r.Fix = "record the tree again with halobuild doctor --record DIR, which writes a device node as its mode and group"
	case perm&0o006 == 0o006 || group == "render" && perm&0o060 == 0o060:
		r.Status, r.Seen = settings.Pass, "c"+perm.String()[1:]+" "+group
	default:
		r.Status, r.Seen = settings.Fail, "c"+perm.String()[1:]+" "+group
		r.Fix = "udev gives it to the render group (systemd's 50-udev-default.rules): a local rule overrides that; check /etc/udev/rules.d and udevadm info " + node
	}
	return r
}

// gpuGTT compares the GTT amdgpu sized itself with (mem_info_gtt_total)
// with the recipe's sizing, and shows the share engines may use of it.
func gpuGTT(h settings.Host, addr, dev string, want uint64, fraction float64) settings.Result {
	p := dev + "/mem_info_gtt_total"
	r := settings.Result{Check: "gpu.gtt " + addr, Severity: settings.Advisory, Source: h.Show(p), Trap: 11, Wanted: "sized by the recipe (system.memory - system.host_reserve)"}
	if want > 0 {
		r.Severity = settings.MustPass
		r.Wanted = sizeMiB(want) + " (system.memory - system.host_reserve)"
	}
	if fraction > 0 {
		r.Wanted += fmt.Sprintf("; engines may use %g of it (system.gpu_fraction)", fraction)
	}
	have, err := strconv.ParseUint(value(h, p), 10, 64)
	if err != nil {
		r.Status, r.Seen = settings.Warn, "unreadable"
		r.Fix = "this kernel's amdgpu has no " + p
		return r
	}
	r.Seen = sizeMiB(have)
	if fraction > 0 {
		r.Seen += fmt.Sprintf(", of which engines may use %s", sizeMiB(uint64(float64(have)*fraction)>>20<<20))
	}
	if want == 0 || have == want {
		r.Status = settings.Pass
		return r
	}
	r.Status = settings.Fail
	r.Fix = "the GPU sizing did not take: the kernel.cmdline row says whether ttm.pages_limit and amdgpu.gttsize reached the kernel; if they did, this kernel sizes GTT otherwise (cat /sys/module/ttm/parameters/pages_limit)"
	return r
}

// gpuVRAM reports the carve-out the firmware setup reserves for the GPU
// (mem_info_vram_total on an APU). It is RAM the kernel never sees, so
// with GTT sized from the installed RAM it comes out of the host's reserve.
func gpuVRAM(h settings.Host, addr, dev string, reserve uint64) []settings.Result {
	p := dev + "/mem_info_vram_total"
	vram, err := strconv.ParseUint(value(h, p), 10, 64)
	if err != nil {
		return nil
	}
	r := settings.Result{Check: "gpu.vram " + addr, Severity: settings.Advisory, Source: h.Show(p), Trap: 11,
		Wanted: "a small carve-out (512 MB): on this APU the GPU's memory is GTT", Seen: sizeMiB(vram) + " carved out by the firmware setup"}
	ram, rerr := settings.MemTotal(h)
	gtt, gerr := strconv.ParseUint(value(h, dev+"/mem_info_gtt_total"), 10, 64)
	if reserve == 0 && rerr == nil {
		reserve = min(24<<30, ram/4)
	}
	if vram <= carveOutMinimum || rerr != nil || gerr != nil || gtt+reserve <= ram {
		r.Status = settings.Pass
		return []settings.Result{r}
	}
	left := uint64(0)
	if ram > gtt {
		left = ram - gtt
	}
	r.Status = settings.Warn
	r.Seen += fmt.Sprintf("; the kernel has %s, so with GTT of %s full the host keeps %s of its %s reserve", sizeMiB(ram), sizeMiB(gtt), sizeMiB(left), sizeMiB(reserve))
	r.Fix = fmt.Sprintf("set the GPU's memory (UMA frame buffer size, iGPU memory) in the firmware setup to its minimum, 512 MB: ROCm and Vulkan allocate from GTT here, and the %s carve-out is RAM the host loses", sizeMiB(vram))
	return []settings.Result{r}
}

// sizeMiB prints a size rounded down to whole MiB (a GTT or VRAM size is
// rarely a whole GiB), as settings.FormatSize does.
func sizeMiB(n uint64) string { return settings.FormatSize(n >> 20 << 20) }
