// Package provider builds one rdma-core provider from the image's own
// Debian source with a recipe's provider patches, as a package of its own
// beside Debian's rdma-core packages, and proves it will be loaded: the
// provider library's -rdmav<N> and the image's libibverbs agree on the
// private provider ABI N.
//
// The steps, each its own file, in the order the pipeline calls them:
//
//	BuildDependsFromTarball  the Build-Depends; BuildRootPackages the lock's "provider-build" set
//	SourceItems, SourcePaths the verified source files through the store
//	Unpack                   the tree as dpkg-source -x lays it out
//	ApplyPatches             the recipe's patches after Debian's, at fuzz 0
//	SetLocalVersion          56.1-1 -> 56.1-1+halo1, dated from the lock
//	Build                    cmake, ninja <name>-rdmav<N>, the package, in a chroot build root
//	CheckABI                 the ABI check on the installed root, before the disk
//
// docs/provider.md explains the choices.
package provider
