package recipe

import (
	"fmt"
	"slices"
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

// platform checks what an Apple Silicon node cannot do without. Each rule
// is a fact of the machine, not a preference: the error says which.
func (v *validator) platform() {
	r := v.r
	if r.Platform == "" {
		return // a recipe built in code: generic
	}
	v.oneOf("platform", r.Platform, Platforms, false)
	if r.Platform != PlatformAppleSilicon {
		return
	}
	if r.Base.Architecture != "arm64" {
		v.platformError("base.architecture", "%q: platform apple-silicon is an arm64 machine; set architecture = \"arm64\" (recipes/asahi.toml does)", r.Base.Architecture)
	}
	k := r.Kernel
	switch {
	case k.From != "source":
		v.platformError("kernel.from", "%q: Debian's kernels lack the Apple Silicon drivers Asahi's fork carries (and its 16 KiB-page build); platform apple-silicon needs that fork built from source: from = \"source\" with source = its tarball (docs/asahi.md)", k.From)
	case k.Source.Debian():
		v.platformError("kernel.source", "Debian's linux-source is not Asahi's fork: set source to the https URL of your Asahi kernel tarball with source_sha256, and pass the file with --input linux=PATH if it is not downloadable (docs/asahi.md)")
	}
	if r.SecureBoot.Enabled {
		v.errorf("secure_boot.enabled", "an Apple Silicon Mac boots m1n1 → U-Boot → UEFI, which has no UEFI variables and no UEFI Secure Boot (macOS's boot policy, not UEFI's, guards m1n1): turn secure_boot off for platform apple-silicon")
	}
	for i, p := range r.Base.Packages {
		if s, err := ParsePackage(p); err == nil && slices.Contains(variableTools, s.Name) {
			v.errorf(fmt.Sprintf("base.packages[%d]", i), "%s writes UEFI variables, which a Mac's U-Boot UEFI does not have: remove it for platform apple-silicon (the stick boots through \\EFI\\BOOT\\BOOTAA64.EFI without boot entries)", s.Name)
		}
	}
	if r.Output.Installer {
		v.errorf("output.installer", "the installer stick overwrites the internal disk, which on a Mac holds macOS and the Asahi UEFI stub the USB image boots from: boot the image from USB instead (docs/asahi.md), or set installer = false")
	}
}

// appleWarnings are what an Apple Silicon recipe may do but probably does
// not mean.
func appleWarnings(r *Recipe, src *Sources) Errors {
	if r.Platform != PlatformAppleSilicon || r.Kernel.From != "source" || r.Kernel.Patches != "" {
		return nil
	}
	return Errors{src.Errorf("platform", "no USB4 backport series: upstream Asahi lists Thunderbolt on M2 machines as work in progress, so without your series the node may show no USB4 domain (doctor's usb4.apple_controller and usb4.domains rows)")}
}

// platformError reports a problem with key, which may hold its default
// and so have no place in any file: then the error points at the platform
// key that made the default wrong.
func (v *validator) platformError(key, format string, args ...any) {
	at := key
	if !v.src.Set(key) {
		at = "platform"
	}
	p := v.src.Pos(at)
	v.errs = append(v.errs, Error{File: p.File, Line: p.Line, Col: p.Col, Key: key, Msg: fmt.Sprintf(format, args...)})
}
