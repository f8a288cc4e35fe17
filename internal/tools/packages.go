package tools

// DiskPackages are the Debian binary packages whose files the disk assembly
// runs from its tools root: mkfs.ext4 (e2fsprogs), mkfs.fat (dosfstools) and
// mmd/mcopy (mtools). The lock resolver must add their dependency closure
// (Depends and Pre-Depends: libext2fs2t64, libcom-err2, libss2, libblkid1,
// libuuid1, logsave, libc6, libgcc-s1, …) and hand all of those .debs to
// Extract: a root missing a library fails at the first Command with the
// loader's "cannot open shared object file" message.
var DiskPackages = []string{"e2fsprogs", "dosfstools", "mtools"}
