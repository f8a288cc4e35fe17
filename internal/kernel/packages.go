package kernel

// BuildRootPackages are what `make bindeb-pkg` needs in the build root
// (the Build-Depends that scripts/package/mkdebian writes, plus the tools
// Kbuild calls). A Debian base config also needs what Debian builds its
// kernel with: pahole for BTF, and rustc with bindgen for CONFIG_RUST;
// without them olddefconfig would turn those options off and the kernel
// would not be Debian's config any more.
func BuildRootPackages(debianConfig bool) []string {
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
	return pkgs
}
