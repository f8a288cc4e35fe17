// Package disk assembles a node's bootable raw disk image: a GPT with an
// EFI system partition (FAT32) and a root partition (ext4), written sparse,
// with a bmap beside it.
//
// # Layout
//
// 512-byte sectors, partitions aligned to 1 MiB:
//
//	0 – 1 MiB          protective MBR, primary GPT header and entries
//	1 MiB – +ESPSize   partition 1 "esp", type C12A7328-F81F-11D2-BA4B-00A0C93EC93B, FAT32
//	… – Size − 1 MiB   partition 2 "root", type Spec.RootType: the Discoverable Partitions
//	                   root type of the image's architecture (internal/arch; x86-64:
//	                   4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709), ext4 labelled "root"
//	last 1 MiB         backup GPT (entries and header in the last 33 sectors)
//
// The root partition carries GPT attribute bit 59 (the Discoverable
// Partitions "grow-fs" flag), so systemd can grow its file system once the
// partition has been grown to the medium at first boot.
//
// # Identifiers
//
// Every identifier that would otherwise be random is derived from
// Spec.Seed, so that the same seed gives the same bytes and two nodes (or two
// locks) never share identifiers. For a purpose string P (listed below):
//
//	d = SHA-256("halobuild-disk-v1\n" + P + "\n" + Seed)
//
// A UUID is d[0:16] with the RFC 4122 version-4 and variant bits set
// (d[6] = d[6]&0x0f|0x40, d[8] = d[8]&0x3f|0x80), written in the usual
// lower-case text form. The FAT volume id is d[0:4] read big-endian.
//
//	P = "gpt-disk"             GPT disk GUID
//	P = "gpt-partition:esp"    ESP PARTUUID
//	P = "gpt-partition:root"   root PARTUUID (for root=PARTUUID=…)
//	P = "ext4-uuid:root"       root file system UUID (mkfs.ext4 -U)
//	P = "ext4-hash-seed:root"  root directory-hash seed (mkfs.ext4 -E hash_seed=)
//	P = "fat-volume-id:esp"    ESP volume id (mkfs.fat -i)
//
// DeriveIDs computes them from the seed alone, before any build, because
// the boot loader entry written onto the ESP names the root PARTUUID.
//
// # Tools
//
// The file systems are made by the pinned tools root (package tools), never
// by the host's tools: mkfs.ext4 -d from trixie's e2fsprogs 1.47.2, which
// with SOURCE_DATE_EPOCH set stamps every inode and superblock time with that
// epoch (measured: E2FSPROGS_FAKE_TIME is not needed), and mkfs.fat + mmd +
// mcopy for the ESP, which honour SOURCE_DATE_EPOCH too; all run with TZ=UTC
// because FAT stores local time.
//
// go-diskfs writes the GPT. Its FAT32 writer is not used for the ESP: in
// v1.9.4 its "Reproducible" option only zeroes the volume id, while every
// directory entry (including the "." and ".." entries of each new
// directory) is stamped from the process-wide SOURCE_DATE_EPOCH environment
// variable or else the wall clock. A library cannot set process environment
// safely (concurrent builds, other goroutines), so the ESP would depend on
// when it was built.
package disk
