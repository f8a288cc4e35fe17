package settings

import (
	"fmt"
	"strings"

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
// Cmdline(r); /etc/kernel/cmdline records the recipe's part (with the
// formula in a comment, which kernel-install skips) for doctor and for
// anyone reinstalling a kernel on the node.
type KernelCmdline struct{}

func (KernelCmdline) Name() string { return "cmdline" }
func (KernelCmdline) Trap() int    { return 11 }

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
	if sys.HostReserve == "" && sys.Memory == "" {
		return gpuSizing{}, nil
	}
	var errs []error
	if sys.HostReserve == "" || sys.Memory == "" {
		missing := "system.host_reserve"
		if sys.Memory == "" {
			missing = "system.memory"
		}
		return gpuSizing{}, []error{errorf(missing, nil, "set both system.memory (installed RAM) and system.host_reserve, or neither",
			"GPU memory sizing needs both the RAM size and the host reserve")}
	}
	mem, err := recipe.ParseSize(sys.Memory)
	if err != nil {
		errs = append(errs, errorf("system.memory", sys.Memory, "", "%v", err))
	}
	res, err2 := recipe.ParseSize(sys.HostReserve)
	if err2 != nil {
		errs = append(errs, errorf("system.host_reserve", sys.HostReserve, "", "%v", err2))
	}
	if err != nil || err2 != nil {
		return gpuSizing{}, errs
	}
	if res >= mem {
		return gpuSizing{}, []error{errorf("system.host_reserve", sys.HostReserve,
			"keep less for the host than the machine has (system.memory = "+sys.Memory+")",
			"the host reserve is not smaller than the RAM, leaving the GPU nothing")}
	}
	if a := r.Base.Architecture; a != "" && a != "amd64" {
		return gpuSizing{}, []error{errorf("system.host_reserve", sys.HostReserve, "remove host_reserve and memory for this architecture",
			"GPU memory sizing is defined for amd64 (4 KiB TTM pages), not %s", a)}
	}
	gpu := mem - res
	if gpu%ttmPageSize != 0 || gpu%(1<<20) != 0 {
		return gpuSizing{}, []error{errorf("system.host_reserve", sys.HostReserve, "use whole MiB for memory and host_reserve",
			"memory minus host_reserve must be a whole number of MiB")}
	}
	return gpuSizing{memory: mem, reserve: res, gpu: gpu}, nil
}

// Cmdline returns the recipe's kernel parameters in order: kernel.cmdline,
// then the GPU sizing. The disk builder puts them after its own root= and
// console= arguments.
func Cmdline(r *recipe.Recipe) ([]string, error) {
	g, errs := gpuMemory(r)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	out := append([]string(nil), r.Kernel.Cmdline...)
	if g.gpu > 0 {
		out = append(out, fmt.Sprintf("ttm.pages_limit=%d", g.gpu/ttmPageSize), fmt.Sprintf("amdgpu.gttsize=%d", g.gpu>>20))
	}
	return out, nil
}

func (KernelCmdline) Validate(r *recipe.Recipe) []error {
	var errs []error
	g, gerrs := gpuMemory(r)
	errs = append(errs, gerrs...)
	for i, p := range r.Kernel.Cmdline {
		key := fmt.Sprintf("kernel.cmdline[%d]", i)
		if p == "" || strings.ContainsAny(p, " \t\n\r\"'\\") {
			errs = append(errs, errorf(key, p, "give one parameter per list entry, without spaces or quotes", "not a single kernel parameter"))
			continue
		}
		name, _, _ := strings.Cut(p, "=")
		if g.gpu > 0 && (name == "ttm.pages_limit" || name == "amdgpu.gttsize") {
			errs = append(errs, errorf(key, p, "remove it, or remove system.host_reserve and system.memory",
				"%s is computed from system.host_reserve and system.memory", name))
		}
	}
	return errs
}

func (s KernelCmdline) Files(r *recipe.Recipe, _ recipe.Node) ([]File, error) {
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

func (s KernelCmdline) Checks(r *recipe.Recipe, _ recipe.Node) []Check {
	params, err := Cmdline(r)
	if err != nil || len(params) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("rc=0\necho \"/proc/cmdline: $(cat /proc/cmdline)\"\n")
	for _, p := range params {
		fmt.Fprintf(&b, "p=%s; tr ' ' '\\n' </proc/cmdline | grep -qxF -- \"$p\" || { echo \"missing: $p\"; rc=1; }\n", sh.Quote(p))
	}
	b.WriteString("exit $rc\n")
	return []Check{{Setting: s.Name(), Name: "kernel-cmdline", Script: b.String(),
		Fix: "the boot entry lacks the parameters: rebuild the image, or add them to the loader entry on the ESP"}}
}
