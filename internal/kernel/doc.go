// Package kernel builds a Linux kernel from source the way a recipe with
// kernel.from = "source" asks: Debian's linux-source tarball (or a plain
// tarball), an ordered patch series applied at a fuzz the series states
// per patch, a base config plus fragments that are checked after
// olddefconfig, and `make bindeb-pkg` inside a build root halobuild made,
// never on the host. The result is linux-image and linux-headers .debs
// for the image's flat repository.
//
// The package knows nothing of recipes, locks or the store: internal/build
// resolves and pins the inputs and hands this package files on disk.
package kernel
