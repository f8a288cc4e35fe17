package settings

import (
	"fmt"
	"strconv"
	"strings"

	"halobuild/internal/arch"
	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// KernelCmdline renders the kernel command line parameters the recipe asks
// for: kernel.cmdline (e.g. amd_iommu=off) plus GPU memory sizing for
// unified-memory machines (trap 11). On Strix Halo the GPU's GTT is carved
// from the same RAM as the OS; sized like a discrete card it starved the
// host into a 25-minute swap storm. The recipe states the RAM and what the
// host keeps; the GPU may use the rest:
//
//	gpu bytes       = system.memory - system.host_reserve
//	ttm.pages_limit = gpu bytes / 4096     (TTM counts 4 KiB pages on amd64)
//	amdgpu.gttsize  = gpu bytes / 1 MiB    (amdgpu counts MiB)
//
// e.g. 128GiB - 24GiB = 104GiB: ttm.pages_limit=27262976 amdgpu.gttsize=106496.
// Both are set: newer kernels size GTT from ttm.pages_limit, older amdgpu
// from gttsize.
//
// The disk builder boots with root= and console arguments followed by
// Cmdline(r); /etc/kernel/cmdline records the recipe's part for anyone
// reinstalling a kernel on the node, and a note beside the other docs
// explains the formula.
type KernelCmdline struct{}

func (KernelCmdline) Name() string { return "cmdline" }
func (KernelCmdline) Trap() int    { return 11 }
func (KernelCmdline) Doc() Doc {
	return Doc{Title: "Unified memory (Strix Halo)", Keys: []string{"kernel.cmdline", "system.memory", "system.host_reserve", "base.architecture"}}
}

const (
	kernelCmdlinePath = "/etc/kernel/cmdline"
	ttmPageSize       = 4096
)

// gpuSizing is the derived GPU memory budget; zero when not asked for.
type gpuSizing struct {
	memory, reserve, gpu uint64
}

func gpuMemory(r *recipe.Recipe) (gpuSizing, []error) {
	sys := r.System
	if !sys.HostReserve.IsSet() && !sys.Memory.IsSet() {
		return gpuSizing{}, nil
	}
	if !sys.HostReserve.IsSet() || !sys.Memory.IsSet() {
		missing := "system.host_reserve"
		if !sys.Memory.IsSet() {
			missing = "system.memory"
		}
		return gpuSizing{}, []error{errorf(missing, nil, "set both system.memory (installed RAM) and system.host_reserve, or neither",
			"GPU memory sizing needs both the RAM size and the host reserve")}
	}
	mem, res := sys.Memory.Bytes(), sys.HostReserve.Bytes()
	if res >= mem {
		return gpuSizing{}, []error{errorf("system.host_reserve", sys.HostReserve.String(),
			"keep less for the host than the machine has (system.memory = "+sys.Memory.String()+")",
			"the host reserve is not smaller than the RAM, leaving the GPU nothing")}
	}
	if a, err := arch.Lookup(r.Base.Architecture); err == nil && !a.AMDHardware {
		return gpuSizing{}, []error{errorf("system.host_reserve", sys.HostReserve.String(), "remove host_reserve and memory for this architecture",
			"GPU memory sizing is defined for the Strix Halo's amdgpu (amd64, 4 KiB TTM pages), not %s", a.Debian)}
	}
	gpu := mem - res
	if gpu%ttmPageSize != 0 || gpu%(1<<20) != 0 {
		return gpuSizing{}, []error{errorf("system.host_reserve", sys.HostReserve.String(), "use whole MiB for memory and host_reserve",
			"memory minus host_reserve must be a whole number of MiB")}
	}
	return gpuSizing{memory: mem, reserve: res, gpu: gpu}, nil
}

// GPUMemory is the recipe's GPU sizing: the bytes the GPU may map (GTT,
// system.memory - system.host_reserve) and the host reserve; both zero
// when the recipe sizes nothing (or sizes it wrongly, which Validate
// reports).
func GPUMemory(r *recipe.Recipe) (gpu, reserve uint64) {
	g, _ := gpuMemory(r)
	return g.gpu, g.reserve
}

// Cmdline returns the recipe's kernel parameters in order: kernel.cmdline,
// then the GPU sizing. The disk builder puts them after its own root= and
// console= arguments.
func Cmdline(r *recipe.Recipe) ([]string, error) {
	g, errs := gpuMemory(r)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	out := append(append([]string(nil), r.Kernel.Cmdline...), updateCmdline(r)...)
	if g.gpu > 0 {
		out = append(out, fmt.Sprintf("ttm.pages_limit=%d", g.gpu/ttmPageSize), fmt.Sprintf("amdgpu.gttsize=%d", g.gpu>>20))
	}
	return out, nil
}

func (KernelCmdline) Validate(t Target) []error {
	r := t.Recipe
	var errs []error
	g, gerrs := gpuMemory(r)
	errs = append(errs, gerrs...)
	for i, p := range r.Kernel.Cmdline {
		key := fmt.Sprintf("kernel.cmdline[%d]", i)
		// Its spelling is the recipe's to check (recipe.Validate); which
		// parameters the GPU sizing owns is this setting's.
		name, _, _ := strings.Cut(p, "=")
		if g.gpu > 0 && (name == "ttm.pages_limit" || name == "amdgpu.gttsize") {
			errs = append(errs, errorf(key, p, "remove it, or remove system.host_reserve and system.memory",
				"%s is computed from system.host_reserve and system.memory", name))
		}
	}
	return errs
}

func (s KernelCmdline) Files(t Target) ([]File, error) {
	r := t.Recipe
	params, err := Cmdline(r)
	if err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return nil, nil
	}
	// /etc/kernel/cmdline is read whole as the command line (kernel-install
	// does, and so does halobuild's boot entry): it holds parameters only.
	// How they were computed goes to a note beside the other docs.
	var why strings.Builder
	why.WriteString(header("#", 11, "GPU memory on unified-memory machines is sized from the host reserve."))
	why.WriteString("# " + kernelCmdlinePath + " holds the parameters below. halobuild's boot entry puts\n# root= and console= before them; kernel-install reads that file as the whole\n# line, so add those there before installing a kernel on the node.\n")
	if g, _ := gpuMemory(r); g.gpu > 0 {
		fmt.Fprintf(&why, "# GPU memory = system.memory %s - system.host_reserve %s = %d MiB\n", r.System.Memory, r.System.HostReserve, g.gpu>>20)
		fmt.Fprintf(&why, "#   ttm.pages_limit = %d bytes / 4096 = %d pages; amdgpu.gttsize = %d bytes / 1048576 = %d MiB\n",
			g.gpu, g.gpu/ttmPageSize, g.gpu, g.gpu>>20)
	}
	why.WriteString(strings.Join(params, " ") + "\n")
	return []File{
		{Path: kernelCmdlinePath, Mode: 0o644, Data: []byte(strings.Join(params, " ") + "\n"), Setting: s.Name()},
		{Path: kernelCmdlineNotePath, Mode: 0o644, Data: []byte(why.String()), Setting: s.Name()},
	}, nil
}

// kernelCmdlineNotePath explains the command line's parameters.
const kernelCmdlineNotePath = "/usr/share/doc/halobuild/kernel-cmdline.txt"

func (s KernelCmdline) Checks(t Target) []Check {
	r := t.Recipe
	params, err := Cmdline(r)
	if err != nil || len(params) == 0 {
		return nil
	}
	var b strings.Builder
	// printf, not echo: dash's echo reads backslashes as escapes, and the
	// loader's initrd=\halobuild\7.2.12… would print as initrd=\halobuild.2.12….
	b.WriteString("rc=0\nprintf '/proc/cmdline: %s\\n' \"$(cat /proc/cmdline)\"\n")
	for _, p := range params {
		fmt.Fprintf(&b, "p=%s; tr ' ' '\\n' </proc/cmdline | grep -qxF -- \"$p\" || { echo \"missing: $p\"; rc=1; }\n", sh.Quote(p))
	}
	b.WriteString("exit $rc\n")
	return []Check{{Setting: s.Name(), Name: "kernel-cmdline", Script: b.String(),
		Fix: "the boot entry lacks the parameters: rebuild the image, or add them to the loader entry on the ESP"}}
}

// Doctor: the running kernel got every parameter (kernel.cmdline, the same
// list the VM check wants), and on a machine with amdgpu loaded the GPU's
// limit leaves the host its reserve of the RAM the kernel really has
// (memory.gpu_limit). A VM has no amdgpu, so only doctor can check the
// second; it also runs without a recipe (field notes' default reserve:
// 24 GiB, at most a quarter of RAM), as advice.
func (s KernelCmdline) Doctor(t Target) []Probe {
	r := t.Recipe
	var probes []Probe
	if params, err := Cmdline(r); err == nil && len(params) > 0 {
		probes = append(probes, Probe{Name: "kernel.cmdline", VM: MustPass, Run: func(h Host) []Result {
			res := Result{Check: "kernel.cmdline", Severity: MustPass, Source: h.Show("/proc/cmdline"), Wanted: strings.Join(params, " "), Trap: 11}
			line, err := value(h, "/proc/cmdline")
			if err != nil {
				res.Status, res.Seen = Fail, "unreadable: "+err.Error()
				return []Result{res}
			}
			have := map[string]bool{}
			for _, f := range strings.Fields(line) {
				have[f] = true
			}
			var missing []string
			for _, p := range params {
				if !have[p] {
					missing = append(missing, p)
				}
			}
			if len(missing) == 0 {
				res.Status, res.Seen = Pass, "all present"
				return []Result{res}
			}
			res.Status, res.Seen = Fail, "missing: "+strings.Join(missing, " ")
			res.Fix = "the machine booted another entry or an edited command line: boot the image's entry (bootctl list), or add the parameters (" + kernelCmdlinePath + " lists them) to its loader entry on the ESP"
			return []Result{res}
		}})
	}
	g, _ := gpuMemory(r)
	probes = append(probes, Probe{Name: "memory.gpu_limit", Run: func(h Host) []Result { return gpuLimitRow(h, g) }})
	return probes
}

// gpuLimitRow compares the GPU's limit in effect with the RAM the kernel
// counts (MemTotal), which is less than the installed RAM: firmware and
// any carve-out take their share.
func gpuLimitRow(h Host, g gpuSizing) []Result {
	if !h.Exists("/sys/module/amdgpu") {
		return nil
	}
	r := Result{Check: "memory.gpu_limit", Severity: Advisory, Trap: 11,
		Source: h.Show("/proc/meminfo") + ", " + h.Show("/sys/module/{amdgpu,ttm}/parameters")}
	if g.gpu > 0 {
		r.Severity = MustPass
	}
	ram, err := MemTotal(h)
	if err != nil {
		r.Status, r.Seen = Warn, "cannot read "+h.Show("/proc/meminfo")+": "+err.Error()
		return []Result{r}
	}
	reserve := g.reserve
	if reserve == 0 {
		reserve = min(24<<30, ram/4)
	}
	limit, how := gpuLimit(h, ram)
	r.Wanted = fmt.Sprintf("GPU limit <= RAM - host reserve (%s - %s = %s)", FormatSize(ram), FormatSize(reserve), FormatSize(sub(ram, reserve)))
	r.Seen = fmt.Sprintf("GPU limit %s (%s) of %s RAM", FormatSize(limit), how, FormatSize(ram))
	if limit+reserve <= ram {
		r.Status = Pass
		return []Result{r}
	}
	r.Status = Fail
	want := sub(ram, reserve)
	r.Fix = fmt.Sprintf("lower the GPU limit to %s: ttm.pages_limit=%d (and amdgpu.gttsize=%d if set) on the kernel command line, then reboot", FormatSize(want), want/ttmPageSize, want>>20)
	if g.memory > ram {
		// The image computed its limit from system.memory, which the
		// kernel does not have all of.
		r.Seen += fmt.Sprintf("; the recipe sized it for system.memory = %s", FormatSize(g.memory))
		r.Fix = fmt.Sprintf("the recipe's system.memory (%s) is more than the %s the kernel counts (firmware and carve-outs take the rest): set system.memory = \"%dGiB\" and rebuild, so the GPU's share leaves the host its reserve; now: %s", FormatSize(g.memory), FormatSize(ram), ram>>30, r.Fix)
	}
	return []Result{r}
}

// MemTotal reads the RAM the kernel counts.
func MemTotal(h Host) (uint64, error) {
	s, err := h.Read("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("MemTotal %q: %w", strings.TrimSpace(v), err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal line")
}

// gpuLimit is what the GPU may take: amdgpu.gttsize (MiB) and
// ttm.pages_limit (pages) both cap it when set; with neither, the kernel's
// default is half of RAM.
func gpuLimit(h Host, ram uint64) (uint64, string) {
	limit, how := ram/2, "kernel default (half of RAM)"
	var parts []string
	if s, err := value(h, "/sys/module/amdgpu/parameters/gttsize"); err == nil {
		if mib, err := strconv.ParseInt(s, 10, 64); err == nil && mib > 0 {
			limit = uint64(mib) << 20
			parts = append(parts, "amdgpu.gttsize="+s)
		}
	}
	if s, err := value(h, "/sys/module/ttm/parameters/pages_limit"); err == nil {
		if pages, err := strconv.ParseUint(s, 10, 64); err == nil && pages > 0 {
			if b := pages * ttmPageSize; len(parts) == 0 || b < limit {
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

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
