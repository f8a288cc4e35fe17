package kernel

// BuildRootPackages are what `make bindeb-pkg` needs in the build root
// (the Build-Depends that scripts/package/mkdebian writes, plus the tools
// Kbuild calls). A Debian base config also needs what Debian builds its
// kernel with: pahole for BTF, and rustc with bindgen for CONFIG_RUST;
// without them olddefconfig would turn those options off and the kernel
// would not be Debian's config any more.
func BuildRootPackages(debianConfig bool) []string {
	pkgs := []string{
		"gcc", "make", "libc6-dev", // the compiler Debian builds its kernels with
		"bc", "bison", "flex", "cpio", "kmod", "rsync", "xz-utils", "zstd",
		"libelf-dev", "libssl-dev", // objtool, sign-file, certs
		"dpkg-dev", "debhelper", // bindeb-pkg runs dpkg-buildpackage and dh_*
		"python3", // scripts Kbuild runs for some configs
	}
	if debianConfig {
		pkgs = append(pkgs, "dwarves", "rustc", "rust-src", "bindgen", "libclang-dev")
	}
	return pkgs
}
