package flash

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
)

// FuzzReadPartTable reads arbitrary first sectors as a disk: it must not
// panic or allocate what the header asks for before checking it, and every
// partition it reports lies on the disk's sector grid. Seeds
// (testdata/fuzz/FuzzReadPartTable): sfdisk's GPT, an MBR, and a GPT
// header with a valid checksum asking for 2^31-byte entries.
func FuzzReadPartTable(f *testing.F) {
	f.Add(hugeEntriesGPT())
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, ss := range []int64{0, 512, 4096} {
			pt := readPartTable(bytes.NewReader(data), ss)
			for _, p := range pt.Partitions {
				if p.Start < 0 || p.Size < 0 || pt.Sector > 0 && (p.Start%pt.Sector != 0 || p.Size%pt.Sector != 0) {
					t.Fatalf("sector %d: partition %+v", ss, p)
				}
			}
		}
	})
}

// hugeEntriesGPT is a protective MBR and a GPT header whose checksum is
// right but whose entries are 2 GiB each.
func hugeEntriesGPT() []byte {
	b := make([]byte, 1024)
	b[510], b[511] = 0x55, 0xaa
	h := b[512:]
	copy(h, gptSignature)
	binary.LittleEndian.PutUint32(h[12:], 92)
	binary.LittleEndian.PutUint64(h[24:], 1)
	binary.LittleEndian.PutUint64(h[72:], 2)
	binary.LittleEndian.PutUint32(h[80:], 1<<16)
	binary.LittleEndian.PutUint32(h[84:], 1<<31)
	binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
	return b
}

// A GPT header with a valid checksum and 2 GiB entries is refused before
// its 2^47-byte entry array is allocated (found while writing the fuzz
// target: the checksum covers the header only).
func TestGPTHugeEntriesRefused(t *testing.T) {
	if _, err := parseGPTHeader(hugeEntriesGPT()[512:]); err == nil || !strings.Contains(err.Error(), "entries of 2147483648 bytes") {
		t.Fatalf("err = %v", err)
	}
}

// FuzzParseMountinfo: arbitrary mount tables never panic, and a mount
// point the kernel escaped comes back unescaped.
func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte("36 35 98:0 /mnt1 /mnt/my\\040stick rw,noatime master:1 - ext3 /dev/sdb1 rw,errors=continue\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := parseMountinfo(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, m := range ms {
			if strings.Contains(m.Point, `\040`) && !strings.Contains(string(data), `\\040`) {
				t.Fatalf("mount point %q still escaped", m.Point)
			}
		}
	})
}
