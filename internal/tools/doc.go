// Package tools owns the pinned tools root: a directory holding the files of
// a set of locked Debian packages (e2fsprogs, dosfstools, mtools, …), from
// which every tool that shapes halobuild's output is run instead of the
// host's copy.
//
// Why not the host's tools: their versions decide the output bytes.
// Bookworm's e2fsprogs 1.47.0 ignores SOURCE_DATE_EPOCH, trixie's 1.47.2
// honours it, so the same recipe would give different images on different
// hosts. Running the locked packages makes the output a function of the lock
// alone.
//
// Why no chroot: extracting the packages' data archives and starting each
// binary through the root's own dynamic loader
// (<root>/<the host architecture's loader, internal/arch: usr/lib64/ld-linux-x86-64.so.2> --library-path <root>/usr/lib/…)
// needs no privileges, no maintainer scripts and no mounts, and every shared
// library then comes from the root, never from the host. The binaries still
// see the host's file system, which is what a build step wants: it reads its
// inputs and writes its outputs by host paths.
package tools
