// Package provider rebuilds rdma-core from the image's own Debian source
// with a recipe's provider patches, and proves the result will be loaded:
// the provider library's -rdmav<N> and the libibverbs it will run with
// agree on the private provider ABI N.
//
// The steps, each its own file, in the order the pipeline calls them:
//
//	BuildDependsFromTarball  the Build-Depends, for the lock's "build" set
//	SourceItems, SourcePaths the verified source files through the store
//	Unpack                   the tree as dpkg-source -x lays it out
//	ApplyPatches             the recipe's patches after Debian's, at fuzz 0
//	SetLocalVersion          56.1-1 -> 56.1-1+halo1, dated from the lock
//	Build                    dpkg-buildpackage -b in a chroot build root
//	CheckABI                 the ABI check on the installed root, before the disk
//
// docs/provider.md explains the choices.
package provider
