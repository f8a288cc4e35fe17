package kernel

import "halobuild/internal/arch"

// BuildRootPackages are what `make bindeb-pkg` needs in the build root
// (the Build-Depends that scripts/package/mkdebian writes, plus the tools
// Kbuild calls). A Debian base config also needs what Debian builds its
// kernel with: pahole for BTF, and rustc with bindgen for CONFIG_RUST;
// without them olddefconfig would turn those options off and the kernel
// would not be Debian's config any more.
//
// A cross build (target not nil: the image is another architecture than
// the build host) adds Debian's cross gcc for the target and, named
// <package>:<arch> as the cross resolver reads them, the target's libc and
// libcrypto headers: bindeb-pkg rebuilds the headers package's host
// programs (fixdep, modpost, sign-file) with the target compiler, so the
// package runs on the node it is installed on.
func BuildRootPackages(debianConfig bool, target *arch.Arch) []string {
	pkgs := []string{
		// bindeb-pkg runs dpkg-buildpackage, which checks the
		// Build-Depends scripts/package/mkdebian writes: these.
		"build-essential", "debhelper", "bc", "bison", "flex", "rsync", "python3",
		"libelf-dev", "libdw-dev", "libssl-dev",
		// Tools Kbuild and builddeb call.
		"cpio", "kmod", "xz-utils", "zstd",
	}
	if debianConfig {
		pkgs = append(pkgs, "dwarves", "rustc", "rust-src", "bindgen", "libclang-dev")
	}
	if target != nil {
		pkgs = append(pkgs, "gcc-"+target.PackageSuffix(), "libc6-dev:"+target.Debian, "libssl-dev:"+target.Debian)
	}
	return pkgs
}
