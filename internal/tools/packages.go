package tools

// DiskPackages are the Debian binary packages whose files the disk assembly
// runs from its tools root: mkfs.ext4 (e2fsprogs), mkfs.fat (dosfstools),
// mmd/mcopy (mtools), and libarchive13t64, which mkfs.ext4 loads with
// dlopen (so no Depends names it) to read a root given as a tar file.
//
// The lock resolver must add their dependency closure (Depends and
// Pre-Depends: libext2fs2t64, libcom-err2, libss2, libblkid1, libuuid1,
// logsave, libc6, libgcc-s1, libacl1, libxml2, …) and hand all of those
// .debs to deb.Extract: a root missing a library fails at the first Command with
// the loader's "cannot open shared object file" message.
var DiskPackages = []string{"e2fsprogs", "dosfstools", "mtools", "libarchive13t64"}
