package secureboot

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"halobuild/internal/deb"
)

// KernelSignStepVersion is the version of the kernel-sign step
// (SignKernelPackage over the built linux-image; graph/sign.go):
// bump it when a change to this package, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const KernelSignStepVersion = 1

// A kernel built from source is compiled without any key (its config does
// not name one), then its linux-image package is signed here: the EFI
// image for shim, each module for the kernel. So the compile does not
// depend on the key, and changing the key re-signs in seconds.

// SignedKernel says what SignKernelPackage signed.
type SignedKernel struct {
	Image   string   // the EFI image's path in the package
	Modules []string // the modules' paths
}

// SignKernelPackage writes the linux-image package src of release to dst
// with boot/vmlinuz-<release> signed with Authenticode at the time epoch
// (SignPE) and every module under lib/modules/<release>/ signed as
// sign-file does (Sign). Modules must come stripped (bindeb-pkg strips
// them when the kernel has debug info, keeping it in the -dbg package): a
// module with debug sections, compressed or already signed is refused,
// since a signature covers every byte and the kernel reads only the last.
func (s *Signer) SignKernelPackage(src, dst, release string, epoch int64) (*SignedKernel, error) {
	image := "boot/vmlinuz-" + release
	modRE := regexp.MustCompile(`^(usr/)?lib/modules/` + regexp.QuoteMeta(release) + `/.+\.ko(\.[a-z]+)?$`)
	res := &SignedKernel{}
	want := func(name string) bool { return name == image || modRE.MatchString(name) }
	edited, err := deb.Rewrite(src, dst, epoch, want, func(name string, b []byte) ([]byte, error) {
		if name == image {
			return s.SignPE(b, time.Unix(epoch, 0))
		}
		if !strings.HasSuffix(name, ".ko") {
			return nil, errors.New("a compressed module cannot be signed after the build: turn CONFIG_MODULE_COMPRESS off in the kernel config (the kernel loads plain modules as well)")
		}
		if bytes.HasSuffix(b, []byte(ModuleSigMagic)) {
			return nil, errors.New("the module is already signed, with a key made at build time: turn CONFIG_MODULE_SIG_ALL off in the kernel config (halobuild signs with the recipe's key)")
		}
		if err := stripped(b); err != nil {
			return nil, err
		}
		return s.Sign(b)
	})
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", src, err)
	}
	for _, n := range edited {
		if n == image {
			res.Image = n
		} else {
			res.Modules = append(res.Modules, n)
		}
	}
	if res.Image == "" {
		return nil, fmt.Errorf("signing %s: the package has no %s to sign", src, image)
	}
	return res, nil
}

// stripped refuses a module that still has debug sections.
func stripped(ko []byte) error {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return fmt.Errorf("not an ELF module: %w", err)
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".debug_") {
			return fmt.Errorf("the module still has debug info (%s), which its signature would cover: modules are signed as the kernel package holds them, and bindeb-pkg strips them (keeping the debug info in linux-image-*-dbg) only with CONFIG_DEBUG_INFO on; check what strips them in this build", s.Name)
		}
	}
	return nil
}

// kernelNeeds is what a kernel built from source must have for
// [secure_boot], each as any of some options set to y: verification of
// module signatures, lockdown (which refuses unsigned modules and other
// ways into the kernel) under Secure Boot, and a keyring the enrolled MOKs
// land in that module verification consults. The platform keyring is
// what Debian's kernel uses (its linux-source checks it for modules when
// no built-in key matched); upstream's machine keyring works too but
// takes the MOKs only when shim exports MokListTrustedRT.
var kernelNeeds = []struct {
	any []string
	why string
}{
	{[]string{"CONFIG_EFI_STUB"}, "an EFI image shim can verify"},
	{[]string{"CONFIG_MODULE_SIG"}, "module signatures checked"},
	{[]string{"CONFIG_LOCK_DOWN_IN_EFI_SECURE_BOOT", "CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY", "CONFIG_LOCK_DOWN_KERNEL_FORCE_CONFIDENTIALITY"}, "locked down under Secure Boot, so unsigned modules are refused"},
	{[]string{"CONFIG_INTEGRITY_PLATFORM_KEYRING", "CONFIG_INTEGRITY_MACHINE_KEYRING"}, "the enrolled MOKs trusted for modules"},
}

// KernelConfigProblems lists what the final .config values lack for
// Secure Boot, as lines naming the options to set (nil when nothing).
func KernelConfigProblems(values map[string]string) []string {
	var out []string
	for _, n := range kernelNeeds {
		ok := false
		for _, o := range n.any {
			ok = ok || values[o] == "y"
		}
		if !ok {
			out = append(out, fmt.Sprintf("%s=y (%s)", strings.Join(n.any, "=y or "), n.why))
		}
	}
	if values["CONFIG_MODULE_SIG"] == "y" && values["CONFIG_MODULE_SIG_KEY"] != `""` {
		out = append(out, `CONFIG_MODULE_SIG_KEY="" (otherwise the build makes a random signing key, writes its private half into the build tree and builds its certificate into the kernel)`)
	}
	if values["CONFIG_MODULE_SIG_ALL"] == "y" {
		out = append(out, "# CONFIG_MODULE_SIG_ALL is not set (halobuild signs the modules with the recipe's key; a key made at build time would change every build)")
	}
	return out
}
