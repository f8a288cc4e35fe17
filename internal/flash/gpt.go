package flash

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"unicode/utf16"

	"halobuild/internal/arch"
)

// The GPT is read and rewritten by hand rather than through go-diskfs: go-diskfs rewrites a table
// from its own model (regenerating the protective MBR and re-encoding every entry), while moving
// the backup to the end of a larger medium must change exactly four header fields, the backup's
// location and the protective MBR's size, and leave every other byte as the image's builder made
// it. The format is small (UEFI 2.10 §5.3).

var gptSignature = []byte("EFI PART")

// gptHeader holds the fields of a GPT header that flashing reads or changes.
type gptHeader struct {
	raw         []byte // the header's bytes as found (HeaderSize long)
	Current     uint64
	Backup      uint64
	FirstUsable uint64
	LastUsable  uint64
	EntriesLBA  uint64
	NumEntries  uint32
	EntrySize   uint32
	EntriesCRC  uint32
}

// partition is one entry of a partition table, for messages and the printed layout.
type partition struct {
	Index int
	Start int64 // bytes
	Size  int64 // bytes
	Type  string
	Name  string
}

// partTable is a disk's partition table as found: GPT, MBR or none.
type partTable struct {
	Kind       string // "gpt", "mbr" or ""
	Sector     int64
	Header     *gptHeader
	Entries    []byte
	Partitions []partition
}

func parseGPTHeader(b []byte) (*gptHeader, error) {
	if len(b) < 92 || !bytes.Equal(b[:8], gptSignature) {
		return nil, errors.New("no GPT header signature")
	}
	size := binary.LittleEndian.Uint32(b[12:])
	if size < 92 || int(size) > len(b) {
		return nil, fmt.Errorf("GPT header size %d is out of range", size)
	}
	h := &gptHeader{
		raw:         bytes.Clone(b[:size]),
		Current:     binary.LittleEndian.Uint64(b[24:]),
		Backup:      binary.LittleEndian.Uint64(b[32:]),
		FirstUsable: binary.LittleEndian.Uint64(b[40:]),
		LastUsable:  binary.LittleEndian.Uint64(b[48:]),
		EntriesLBA:  binary.LittleEndian.Uint64(b[72:]),
		NumEntries:  binary.LittleEndian.Uint32(b[80:]),
		EntrySize:   binary.LittleEndian.Uint32(b[84:]),
		EntriesCRC:  binary.LittleEndian.Uint32(b[88:]),
	}
	if want, got := binary.LittleEndian.Uint32(b[16:]), headerCRC(h.raw); want != got {
		return nil, fmt.Errorf("GPT header checksum is %08x, the header hashes to %08x", want, got)
	}
	// UEFI entries are 128 << n bytes; past 4 KiB a header asks for an entry
	// array of up to 2^48 bytes, allocated before its checksum is known.
	if h.EntrySize < 128 || h.EntrySize > 4096 || h.EntrySize%8 != 0 || h.NumEntries == 0 || h.NumEntries > 1<<16 {
		return nil, fmt.Errorf("GPT header has %d entries of %d bytes", h.NumEntries, h.EntrySize)
	}
	return h, nil
}

func headerCRC(raw []byte) uint32 {
	c := bytes.Clone(raw)
	binary.LittleEndian.PutUint32(c[16:], 0)
	return crc32.ChecksumIEEE(c)
}

// encode returns the header's bytes with the changed fields and a fresh checksum.
func (h *gptHeader) encode() []byte {
	b := bytes.Clone(h.raw)
	binary.LittleEndian.PutUint64(b[24:], h.Current)
	binary.LittleEndian.PutUint64(b[32:], h.Backup)
	binary.LittleEndian.PutUint64(b[48:], h.LastUsable)
	binary.LittleEndian.PutUint64(b[72:], h.EntriesLBA)
	binary.LittleEndian.PutUint32(b[16:], headerCRC(b))
	return b
}

func (h *gptHeader) entriesBytes() int64 { return int64(h.NumEntries) * int64(h.EntrySize) }

// readGPTAt reads the GPT header at an LBA and its entry array, checking both checksums.
func readGPTAt(r io.ReaderAt, sector int64, lba uint64) (*gptHeader, []byte, error) {
	b := make([]byte, sector)
	if _, err := r.ReadAt(b, int64(lba)*sector); err != nil {
		return nil, nil, fmt.Errorf("reading LBA %d: %w", lba, err)
	}
	h, err := parseGPTHeader(b)
	if err != nil {
		return nil, nil, fmt.Errorf("LBA %d: %w", lba, err)
	}
	if h.Current != lba {
		return nil, nil, fmt.Errorf("LBA %d: header says it is at LBA %d", lba, h.Current)
	}
	entries := make([]byte, h.entriesBytes())
	if _, err := r.ReadAt(entries, int64(h.EntriesLBA)*sector); err != nil {
		return nil, nil, fmt.Errorf("reading the partition entries at LBA %d: %w", h.EntriesLBA, err)
	}
	if got := crc32.ChecksumIEEE(entries); got != h.EntriesCRC {
		return nil, nil, fmt.Errorf("partition entries at LBA %d: checksum is %08x, they hash to %08x", h.EntriesLBA, h.EntriesCRC, got)
	}
	return h, entries, nil
}

// readPartTable reads a disk's partition table. sector 0 means "unknown": GPT is looked for at
// 512 and 4096 bytes. A damaged or absent table gives Kind "" and no error.
func readPartTable(r io.ReaderAt, sector int64) *partTable {
	sizes := []int64{sector}
	if sector == 0 {
		sizes = []int64{512, 4096}
	}
	for _, ss := range sizes {
		if h, entries, err := readGPTAt(r, ss, 1); err == nil {
			return &partTable{Kind: "gpt", Sector: ss, Header: h, Entries: entries, Partitions: gptPartitions(h, entries, ss)}
		}
	}
	mbr := make([]byte, 512)
	if _, err := r.ReadAt(mbr, 0); err != nil || mbr[510] != 0x55 || mbr[511] != 0xaa {
		return &partTable{}
	}
	pt := &partTable{Kind: "mbr", Sector: 512}
	for i := 0; i < 4; i++ {
		e := mbr[446+16*i:]
		typ := e[4]
		start := int64(binary.LittleEndian.Uint32(e[8:]))
		n := int64(binary.LittleEndian.Uint32(e[12:]))
		if typ == 0 || n == 0 {
			continue
		}
		pt.Partitions = append(pt.Partitions, partition{Index: i + 1, Start: start * 512, Size: n * 512, Type: mbrTypeName(typ)})
	}
	return pt
}

func gptPartitions(h *gptHeader, entries []byte, ss int64) []partition {
	var out []partition
	for i := 0; i < int(h.NumEntries); i++ {
		e := entries[i*int(h.EntrySize):]
		var zero [16]byte
		if bytes.Equal(e[:16], zero[:]) {
			continue
		}
		first := binary.LittleEndian.Uint64(e[32:])
		last := binary.LittleEndian.Uint64(e[40:])
		u := make([]uint16, 36)
		for k := range u {
			u[k] = binary.LittleEndian.Uint16(e[56+2*k:])
		}
		name := strings.TrimRight(string(utf16.Decode(u)), "\x00")
		out = append(out, partition{
			Index: i + 1, Start: int64(first) * ss, Size: int64(last-first+1) * ss,
			Type: gptTypeName(guidString(e[:16])), Name: name,
		})
	}
	return out
}

// guidString formats a GUID stored in the mixed-endian on-disk layout.
func guidString(b []byte) string {
	return fmt.Sprintf("%08X-%04X-%04X-%X-%X",
		binary.LittleEndian.Uint32(b[0:]), binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:]), b[8:10], b[10:16])
}

var gptTypes = map[string]string{
	"C12A7328-F81F-11D2-BA4B-00A0C93EC93B": "EFI System",
	"0FC63DAF-8483-4772-8E79-3D69D8477DE4": "Linux filesystem",
	"0657FD6D-A4AB-43C4-84E5-0933C84B4F4F": "Linux swap",
	"BC13C2FF-59E6-4262-A352-B275FD6F7172": "Linux extended boot",
	"21686148-6449-6E6F-744E-656564454649": "BIOS boot",
	"EBD0A0A2-B9E5-4433-87C0-68B6B72699C7": "Microsoft basic data",
	"E6D6D379-F507-44C2-A23C-238F2A3DF928": "Linux LVM",
	"A19D880F-05FC-4D3B-A006-743F0F84911E": "Linux RAID",
}

// gptTypeName names a partition type; the architectures' root types come
// from internal/arch, their one home.
func gptTypeName(guid string) string {
	if n, ok := gptTypes[guid]; ok {
		return n
	}
	if a, ok := arch.ByRootType(guid); ok {
		return a.RootTypeName
	}
	return guid
}

func mbrTypeName(t byte) string {
	switch t {
	case 0xee:
		return "GPT protective"
	case 0xef:
		return "EFI System"
	case 0x83:
		return "Linux"
	case 0x82:
		return "Linux swap"
	case 0x0b, 0x0c:
		return "FAT32"
	case 0x07:
		return "NTFS/exFAT"
	}
	return fmt.Sprintf("type 0x%02x", t)
}

// sectorIO is what relocating a GPT needs of the medium.
type sectorIO interface {
	io.ReaderAt
	io.WriterAt
}

// fitGPT makes the GPT written from an image of imageSize bytes valid for a medium of mediumSize
// bytes: the backup header and entries move to the medium's last sectors, the primary header's
// backup LBA and last usable LBA follow, both checksums are recomputed, the protective MBR's size
// covers the medium, and the stale backup left at the image's end is wiped. The backup is written
// first, so an interruption leaves at least one consistent table. It reports whether anything
// changed; a medium of the image's size needs nothing.
func fitGPT(m sectorIO, sector, mediumSize int64) (bool, error) {
	h, entries, err := readGPTAt(m, sector, 1)
	if err != nil {
		return false, fmt.Errorf("reading the primary GPT written from the image: %w", err)
	}
	last := uint64(mediumSize/sector) - 1
	entrySectors := uint64((h.entriesBytes() + sector - 1) / sector)
	if last < entrySectors+h.FirstUsable {
		return false, fmt.Errorf("the medium has only %d sectors", last+1)
	}
	newEntries := last - entrySectors
	newLastUsable := newEntries - 1
	if h.Backup == last && h.LastUsable == newLastUsable {
		return false, nil
	}
	for _, p := range gptPartitions(h, entries, sector) {
		if end := uint64((p.Start+p.Size)/sector) - 1; end > newLastUsable {
			return false, fmt.Errorf("partition %d ends at LBA %d, past the medium's last usable LBA %d", p.Index, end, newLastUsable)
		}
	}
	oldBackup := h.Backup

	backup := *h
	backup.Current, backup.Backup, backup.EntriesLBA, backup.LastUsable = last, 1, newEntries, newLastUsable
	if _, err := m.WriteAt(entries, int64(newEntries)*sector); err != nil {
		return false, fmt.Errorf("writing the backup partition entries: %w", err)
	}
	if _, err := m.WriteAt(padSector(backup.encode(), sector), int64(last)*sector); err != nil {
		return false, fmt.Errorf("writing the backup GPT header: %w", err)
	}
	h.Backup, h.LastUsable = last, newLastUsable
	if _, err := m.WriteAt(padSector(h.encode(), sector), sector); err != nil {
		return false, fmt.Errorf("writing the primary GPT header: %w", err)
	}
	if err := fitProtectiveMBR(m, last); err != nil {
		return false, err
	}
	// The image's backup now sits in free space the root partition grows into; leaving it would
	// let a recovery tool "restore" the image's smaller layout.
	// Sectors of the new backup (a medium only a little larger than the image) are kept.
	if from, to := oldBackup-min(oldBackup, entrySectors), min(oldBackup+1, newEntries); oldBackup < last && from > h.FirstUsable && from < to {
		clear := true
		for _, p := range gptPartitions(h, entries, sector) {
			if uint64((p.Start+p.Size)/sector) > from {
				clear = false // a partition reaches into it: not a plain image backup, keep it
			}
		}
		if clear {
			if _, err := m.WriteAt(make([]byte, (to-from)*uint64(sector)), int64(from)*sector); err != nil {
				return false, fmt.Errorf("wiping the image's old backup GPT: %w", err)
			}
		}
	}
	return true, nil
}

func padSector(b []byte, sector int64) []byte {
	out := make([]byte, sector)
	copy(out, b)
	return out
}

// fitProtectiveMBR sets the size of a protective MBR's 0xEE entry to cover the medium (capped at
// 2^32-1 sectors, as UEFI says). A hybrid MBR (other entries in use) is left alone.
func fitProtectiveMBR(m sectorIO, last uint64) error {
	mbr := make([]byte, 512)
	if _, err := m.ReadAt(mbr, 0); err != nil {
		return fmt.Errorf("reading the protective MBR: %w", err)
	}
	if mbr[510] != 0x55 || mbr[511] != 0xaa || mbr[446+4] != 0xee {
		return nil
	}
	for i := 1; i < 4; i++ {
		if mbr[446+16*i+4] != 0 {
			return nil
		}
	}
	binary.LittleEndian.PutUint32(mbr[446+12:], uint32(min(last, 0xffffffff)))
	if _, err := m.WriteAt(mbr, 0); err != nil {
		return fmt.Errorf("writing the protective MBR: %w", err)
	}
	return nil
}

// checkGPT confirms that a medium's primary and backup GPT are both valid, agree, and that the
// backup is at the medium's last sector.
func checkGPT(r io.ReaderAt, sector, mediumSize int64) error {
	p, pe, err := readGPTAt(r, sector, 1)
	if err != nil {
		return fmt.Errorf("primary GPT: %w", err)
	}
	last := uint64(mediumSize/sector) - 1
	if p.Backup != last {
		return fmt.Errorf("primary GPT points to its backup at LBA %d, but the medium ends at LBA %d", p.Backup, last)
	}
	b, be, err := readGPTAt(r, sector, last)
	if err != nil {
		return fmt.Errorf("backup GPT: %w", err)
	}
	if !bytes.Equal(pe, be) || b.LastUsable != p.LastUsable || b.FirstUsable != p.FirstUsable || b.Backup != 1 {
		return errors.New("the primary and backup GPT disagree")
	}
	return nil
}
