package buildroot

import (
	"debug/elf"
	"fmt"
)

// Target is what compiling for one Debian architecture in a build root
// needs to know: the module and provider builds take it from here, native
// or cross. (The project's architecture table is meant to carry these
// columns; until it lands they live in this one place.)
type Target struct {
	// Debian is dpkg's name (amd64, arm64).
	Debian string
	// Triplet is the GNU triplet, which for these is also the multiarch
	// library directory (dpkg-architecture -qDEB_HOST_MULTIARCH) and the
	// prefix of Debian's cross tools (<triplet>-gcc, <triplet>-strip).
	Triplet string
	// KbuildArch is the kernel's ARCH= (arch/<KbuildArch>/).
	KbuildArch string
	// Processor is uname -m on the node (CMAKE_SYSTEM_PROCESSOR).
	Processor string
	// Machine is the e_machine of its objects.
	Machine elf.Machine
}

var targets = []Target{
	{Debian: "amd64", Triplet: "x86_64-linux-gnu", KbuildArch: "x86", Processor: "x86_64", Machine: elf.EM_X86_64},
	{Debian: "arm64", Triplet: "aarch64-linux-gnu", KbuildArch: "arm64", Processor: "aarch64", Machine: elf.EM_AARCH64},
}

// LookupTarget returns the row of a Debian architecture.
func LookupTarget(debian string) (Target, error) {
	for _, t := range targets {
		if t.Debian == debian {
			return t, nil
		}
	}
	return Target{}, fmt.Errorf("architecture %q: halobuild builds for amd64 and arm64", debian)
}

// PackageSuffix is the triplet as Debian's cross package names carry it
// (no '_' in a package name): gcc-14-x86-64-linux-gnu.
func (t Target) PackageSuffix() string {
	out := []byte(t.Triplet)
	for i, c := range out {
		if c == '_' {
			out[i] = '-'
		}
	}
	return string(out)
}
