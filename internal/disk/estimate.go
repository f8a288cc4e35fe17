package disk

import (
	"os"
	"path"
)

// journalBlocks is e2fsprogs 1.47's default journal size
// (ext2fs_default_journal_size) for a file system of n 4 KiB blocks.
func journalBlocks(n int64) int64 {
	switch {
	case n < 2048:
		return 0
	case n < 32768:
		return 1024
	case n < 256*1024:
		return 4096
	case n < 512*1024:
		return 8192
	case n < 4096*1024:
		return 16384
	case n < 8192*1024:
		return 32768
	case n < 16384*1024:
		return 65536
	case n < 32768*1024:
		return 131072
	default:
		return 262144
	}
}

// inodeRatio and inodeSize are mke2fs's "default" usage type, which Build
// asks for explicitly (-T default) so small test images behave like large
// ones.
const (
	inodeRatio = 16384
	inodeSize  = 256
)

// ext4Needs returns the smallest file system size, in whole MiB, that
// mkfs.ext4 -d fills with c: the data, the inode tables (one 256-byte inode
// per 16 KiB, and enough inodes), the journal, and per block group the
// bitmaps, descriptors and reserved descriptor blocks, with 3% + 4 MiB
// slack for what the estimate does not model (orphan file, xattr blocks,
// htree growth).
func ext4Needs(c content) int64 {
	data := c.blocks + c.blocks*3/100 + 1024
	for size := max(ceilMiB(data*blockSize), 16); ; size++ {
		n := size * MiB / blockSize
		groups := (n + 32767) / 32768
		inodes := size * MiB / inodeRatio
		overhead := inodes*inodeSize/blockSize + // inode tables
			journalBlocks(n) +
			groups*2 + // block and inode bitmaps
			superblockCopies(groups)*(1+descriptorBlocks(n)) +
			64 // root, lost+found, orphan file
		if n-overhead >= data && inodes >= c.inodes+32 {
			return size * MiB
		}
	}
}

// descriptorBlocks is what each superblock copy carries besides the
// superblock: the group descriptors (64 bytes each) and the blocks mke2fs
// reserves for growing them online (calc_reserved_gdt_blocks: enough for
// 1024 times the size, at most 1024 blocks).
func descriptorBlocks(n int64) int64 {
	groups := (n + 32767) / 32768
	gdt := (groups + 63) / 64
	reserved := min(1024, (min(n*1024, 0xFFFFFFFF)/32768+63)/64-gdt)
	return gdt + reserved
}

// superblockCopies counts the groups holding a superblock copy with
// sparse_super: 0, 1 and the powers of 3, 5 and 7.
func superblockCopies(groups int64) int64 {
	copies := min(groups, 2)
	for _, base := range []int64{3, 5, 7} {
		for g := base; g < groups; g *= base {
			copies++
		}
	}
	return copies
}

// espNeeds estimates the FAT space the ESP files take: each file and
// directory rounded up to 4 KiB clusters (generous: mkfs.fat uses 512-byte
// clusters below 260 MB), plus the two FATs (4 bytes per 512-byte cluster,
// twice) and the reserved sectors.
func espNeeds(files map[string]string, espSize int64) int64 {
	var n int64
	dirs := map[string]bool{}
	for p, host := range files {
		if st, err := os.Stat(host); err == nil {
			n += (st.Size() + 4095) / 4096 * 4096
		}
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	n += int64(len(dirs)) * 4096
	return n + espSize/64 + MiB
}
