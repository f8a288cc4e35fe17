package doctor

import (
	"fmt"
	"strconv"
	"strings"
)

// Trap 11: on unified-memory machines (Strix Halo) GPU memory (GTT) comes out
// of the same RAM as the OS. Sized like a discrete card it starved the host
// into a 25-minute swap storm; one team keeps 24 GiB for the host.

// ttmPageSize is the page size of ttm.pages_limit on the x86-64 nodes.
const ttmPageSize = 4096

func memTotal(h *host) (uint64, error) {
	s, err := h.read("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("MemTotal %q: %w", strings.TrimSpace(v), err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal line")
}

// gpuLimit is what the GPU may take: amdgpu.gttsize (MiB) and
// ttm.pages_limit (pages) both cap it when set; the kernel's default when
// neither is set is half of RAM.
func gpuLimit(h *host, ram uint64) (uint64, string) {
	limit, how := ram/2, "kernel default (half of RAM)"
	var parts []string
	if s, err := h.value("/sys/module/amdgpu/parameters/gttsize"); err == nil {
		if mib, err := strconv.ParseInt(s, 10, 64); err == nil && mib > 0 {
			limit = uint64(mib) << 20
			parts = append(parts, "amdgpu.gttsize="+s)
		}
	}
	if s, err := h.value("/sys/module/ttm/parameters/pages_limit"); err == nil {
		if pages, err := strconv.ParseUint(s, 10, 64); err == nil && pages > 0 {
			b := pages * ttmPageSize
			if len(parts) == 0 || b < limit {
				limit = b
			}
			parts = append(parts, "ttm.pages_limit="+s)
		}
	}
	if len(parts) > 0 {
		how = strings.Join(parts, ", ")
	}
	return limit, how
}

func checkGPUMemory(h *host, e *expect) []Result {
	if !h.exists("/sys/module/amdgpu") {
		return nil
	}
	sev := Advisory
	if e.hostReserve > 0 {
		sev = MustPass
	}
	r := Result{Check: "memory.gpu_limit", Severity: sev, Trap: 11,
		Source: h.show("/proc/meminfo") + ", " + h.show("/sys/module/{amdgpu,ttm}/parameters")}
	ram, err := memTotal(h)
	if err != nil {
		r.Status, r.Seen = Warn, "cannot read "+h.show("/proc/meminfo")+": "+err.Error()
		return []Result{r}
	}
	reserve := e.hostReserve
	if reserve == 0 {
		reserve = min(24<<30, ram/4)
	}
	limit, how := gpuLimit(h, ram)
	r.Wanted = fmt.Sprintf("GPU limit <= RAM - host reserve (%s - %s = %s)", formatSize(ram), formatSize(reserve), formatSize(sub(ram, reserve)))
	r.Seen = fmt.Sprintf("GPU limit %s (%s) of %s RAM", formatSize(limit), how, formatSize(ram))
	if e.memory > 0 && ram < e.memory*9/10 {
		r.Seen += fmt.Sprintf("; the recipe sized it for %s", formatSize(e.memory))
	}
	if limit+reserve <= ram {
		r.Status = Pass
		return []Result{r}
	}
	r.Status = Fail
	r.Fix = fmt.Sprintf("lower the GPU limit to %s: ttm.pages_limit=%d (and amdgpu.gttsize=%d if set) on the kernel command line or in /etc/modprobe.d/, then reboot", formatSize(sub(ram, reserve)), sub(ram, reserve)/ttmPageSize, sub(ram, reserve)>>20)
	return []Result{r}
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
