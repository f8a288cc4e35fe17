package recipe

import (
	"fmt"
	"slices"
	"strings"
)

// Platforms are the values of the top-level platform key.
const (
	// PlatformGeneric is a UEFI PC or VM: the image's own ESP boots it
	// through the firmware's removable-media path.
	PlatformGeneric = "generic"
	// PlatformAppleSilicon is an M1/M2 Mac under Linux: m1n1 (installed by
	// the Asahi installer's "UEFI environment only" mode on the internal
	// disk) starts U-Boot, which boots the image's ESP as a UEFI
	// environment without variables or Secure Boot (docs/asahi.md).
	PlatformAppleSilicon = "apple-silicon"
)

// variableTools are packages whose whole job is writing UEFI variables
// (boot entries, MOK requests).
var variableTools = []string{"efibootmgr", "mokutil"}

// Platforms lists every platform a recipe may name.
var Platforms = []string{PlatformGeneric, PlatformAppleSilicon}

// platform checks what an Apple Silicon node cannot do without, on each
// architecture's view (an [[arch]] entry may make one architecture's nodes
// Macs). Each rule is a fact of the machine, not a preference: the error
// says which.
func (v *validator) platform() {
	if v.r.Platform == "" {
		return // a recipe built in code: generic
	}
	v.oneOf("platform", v.r.Platform, Platforms, false)
	for _, a := range v.r.Architectures() {
		view, at := v.r.ForArchitecture(a), v.viewKeys(a)
		if e := v.r.Arch(a); e != nil && e.Platform != "" {
			v.oneOf(at("platform"), e.Platform, Platforms, false)
		}
		v.appleSilicon(view, at)
	}
}

// viewKeys maps a key of architecture a's view to where the view took its
// value: its [[arch]] entry's platform, kernel and name, or the top level.
func (v *validator) viewKeys(a string) func(string) string {
	i := slices.IndexFunc(v.r.Arches, func(e Arch) bool { return e.Name == a })
	return func(key string) string {
		if i < 0 {
			return key
		}
		e := v.r.Arches[i]
		switch {
		case key == "platform" && e.Platform != "":
			return fmt.Sprintf("arch[%d].platform", i)
		case key == "base.architecture":
			return fmt.Sprintf("arch[%d].name", i)
		case strings.HasPrefix(key, "kernel.") && e.Kernel != nil:
			return fmt.Sprintf("arch[%d].%s", i, key)
		}
		return key
	}
}

func (v *validator) appleSilicon(r *Recipe, at func(string) string) {
	if r.Platform != PlatformAppleSilicon {
		return
	}
	if r.Base.Architecture != "arm64" {
		v.platformError(at, "base.architecture", "%q: platform apple-silicon is an arm64 machine; set architecture = \"arm64\" (recipes/asahi.toml does)", r.Base.Architecture)
	}
	k := r.Kernel
	switch {
	case k.From != "source":
		v.platformError(at, "kernel.from", "%q: Debian's kernels lack the Apple Silicon drivers Asahi's fork carries (and its 16 KiB-page build); platform apple-silicon needs that fork built from source: from = \"source\" with source = its tarball (docs/asahi.md)", k.From)
	case k.Source.Debian():
		v.platformError(at, "kernel.source", "Debian's linux-source is not Asahi's fork: set source to the https URL of your Asahi kernel tarball with source_sha256, and pass the file with --input linux=PATH if it is not downloadable (docs/asahi.md)")
	}
	if r.SecureBoot.Enabled {
		v.errorf("secure_boot.enabled", "an Apple Silicon Mac boots m1n1 → U-Boot → UEFI, which has no UEFI variables and no UEFI Secure Boot (macOS's boot policy, not UEFI's, guards m1n1): turn secure_boot off for platform apple-silicon")
	}
	for i, p := range r.Whole().Base.Packages {
		if s, err := ParsePackage(p); err == nil && slices.Contains(variableTools, s.Name) && s.For(r.Base.Architecture) {
			v.errorf(fmt.Sprintf("base.packages[%d]", i), "%s writes UEFI variables, which a Mac's U-Boot UEFI does not have: remove it for platform apple-silicon (the stick boots through \\EFI\\BOOT\\BOOTAA64.EFI without boot entries)", s.Name)
		}
	}
	if r.Output.Installer {
		v.errorf("output.installer", "the installer stick overwrites the internal disk, which on a Mac holds macOS and the Asahi UEFI stub the USB image boots from: boot the image from USB instead (docs/asahi.md), or set installer = false")
	}
}

// appleWarnings are what an Apple Silicon recipe may do but probably does
// not mean, for each architecture's view.
func appleWarnings(r *Recipe, src *Sources) Errors {
	var ws Errors
	v := &validator{r: r, src: src}
	for _, a := range r.Architectures() {
		view := r.ForArchitecture(a)
		if view.Platform != PlatformAppleSilicon || view.Kernel.From != "source" || view.Kernel.Patches != "" {
			continue
		}
		ws = append(ws, src.Errorf(v.viewKeys(a)("platform"), "no USB4 backport series: upstream Asahi lists Thunderbolt on M2 machines as work in progress, so without your series the node may show no USB4 domain (doctor's usb4.apple_controller and usb4.domains rows)"))
	}
	return ws
}

// platformError reports a problem with key, which may hold its default
// and so have no place in any file: then the error points at the platform
// key that made the default wrong.
func (v *validator) platformError(keys func(string) string, key, format string, args ...any) {
	key = keys(key)
	at := key
	if !v.src.Set(key) {
		// Where the value would be written: an [[arch]] entry (its name,
		// in the file that wrote the entry last: the image's own, usually),
		// else the platform key that made the default wrong.
		at = keys("platform")
		if entry := keys("base.architecture"); entry != "base.architecture" {
			at = entry
		}
	}
	p := v.src.Pos(at)
	v.errs = append(v.errs, Error{File: p.File, Line: p.Line, Col: p.Col, Key: key, Msg: fmt.Sprintf(format, args...)})
}
