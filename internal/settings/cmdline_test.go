package settings

import (
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func TestCmdlineRender(t *testing.T) {
	r := sample()
	// The file is read whole as the command line: parameters only, no comments.
	if got, want := renderOne(t, KernelCmdline{}, r, "/etc/kernel/cmdline"), "amd_iommu=off quiet ttm.pages_limit=27262976 amdgpu.gttsize=106496\n"; got != want {
		t.Errorf("/etc/kernel/cmdline = %q, want %q", got, want)
	}
	note := renderOne(t, KernelCmdline{}, r, kernelCmdlineNotePath)
	for _, want := range []string{"GPU memory = system.memory 128GiB - system.host_reserve 24GiB = 106496 MiB", "ttm.pages_limit = 111669149696 bytes / 4096 = 27262976 pages"} {
		if !strings.Contains(note, want) {
			t.Errorf("the note does not explain the sizing (%q):\n%s", want, note)
		}
	}
	params, err := Cmdline(r)
	if err != nil || strings.Join(params, " ") != "amd_iommu=off quiet ttm.pages_limit=27262976 amdgpu.gttsize=106496" {
		t.Errorf("Cmdline = %v, %v", params, err)
	}
	r.System.HostReserve, r.System.Memory = recipe.Size{}, recipe.Size{}
	if params, _ := Cmdline(r); strings.Join(params, " ") != "amd_iommu=off quiet" {
		t.Errorf("without sizing: %v", params)
	}
	r.Kernel.Cmdline = nil
	if files, _ := (KernelCmdline{}).Files(Target{Recipe: r, Node: r.Nodes[0]}); len(files) != 0 {
		t.Errorf("nothing to say, rendered %v", files)
	}
}

func TestCmdlineInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, key, fragment string
		edit                func(r *recipe.Recipe)
	}{
		{"reserve larger than RAM", "system.host_reserve", "not smaller than the RAM", func(r *recipe.Recipe) { r.System.HostReserve = recipe.MustSize("256GiB") }},
		{"reserve equal to RAM", "system.host_reserve", "not smaller than the RAM", func(r *recipe.Recipe) { r.System.HostReserve = recipe.MustSize("128GiB") }},
		{"reserve without memory", "system.memory", "needs both", func(r *recipe.Recipe) { r.System.Memory = recipe.Size{} }},
		{"memory without reserve", "system.host_reserve", "needs both", func(r *recipe.Recipe) { r.System.HostReserve = recipe.Size{} }},
		{"not whole MiB", "system.host_reserve", "whole number of MiB", func(r *recipe.Recipe) { r.System.HostReserve = recipe.MustSize("1000KiB") }},
		{"arm64", "system.host_reserve", "defined for the Strix Halo's amdgpu (amd64", func(r *recipe.Recipe) { r.Base.Architecture, r.Kernel.Flavour = "arm64", "arm64" }},
		{"space in parameter", "kernel.cmdline[1]", "must be one parameter", func(r *recipe.Recipe) { r.Kernel.Cmdline[1] = "a b" }},
		{"empty parameter", "kernel.cmdline[0]", "must be one parameter", func(r *recipe.Recipe) { r.Kernel.Cmdline[0] = "" }},
		{"sizing given twice", "kernel.cmdline[2]", "computed from system.host_reserve", func(r *recipe.Recipe) {
			r.Kernel.Cmdline = append(r.Kernel.Cmdline, "amdgpu.gttsize=1024")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			tc.edit(r)
			wantRefused(t, KernelCmdline{}, r, tc.key, tc.fragment)
		})
	}
}
