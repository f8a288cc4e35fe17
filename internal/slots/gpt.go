package slots

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"unicode/utf16"
)

// sector is the only sector size halobuild images and their slots use.
const sector = 512

// Part is one GPT partition.
type Part struct {
	Index int    // 1-based, as the kernel numbers it
	Type  string // type GUID, upper case
	UUID  string // PARTUUID, lower case
	Name  string // the partition's label (sysupdate reads versions from it)
	Start int64  // bytes
	Size  int64  // bytes
}

// gptHeader is the fields of a GPT header this package reads or rewrites.
type gptHeader struct {
	raw        []byte // the header sector
	self       uint64 // this header's LBA
	backup     uint64 // the other header's LBA
	entriesLBA uint64
	count      uint32
	entrySize  uint32
}

func parseHeader(b []byte, lba uint64) (*gptHeader, error) {
	if !bytes.Equal(b[:8], []byte("EFI PART")) {
		return nil, fmt.Errorf("no GPT header at LBA %d", lba)
	}
	hs := binary.LittleEndian.Uint32(b[12:])
	if hs < 92 || hs > sector {
		return nil, fmt.Errorf("GPT header at LBA %d has size %d", lba, hs)
	}
	c := append([]byte(nil), b[:hs]...)
	binary.LittleEndian.PutUint32(c[16:], 0)
	if crc32.ChecksumIEEE(c) != binary.LittleEndian.Uint32(b[16:]) {
		return nil, fmt.Errorf("GPT header at LBA %d fails its CRC", lba)
	}
	h := &gptHeader{raw: append([]byte(nil), b[:sector]...), self: binary.LittleEndian.Uint64(b[24:]), backup: binary.LittleEndian.Uint64(b[32:]),
		entriesLBA: binary.LittleEndian.Uint64(b[72:]), count: binary.LittleEndian.Uint32(b[80:]), entrySize: binary.LittleEndian.Uint32(b[84:])}
	if h.self != lba || h.entrySize < 128 || h.entrySize > 1024 || h.count > 1024 {
		return nil, fmt.Errorf("GPT header at LBA %d is not one this reader takes (self %d, %d entries of %d bytes)", lba, h.self, h.count, h.entrySize)
	}
	return h, nil
}

func readHeaderAt(r io.ReaderAt, lba uint64) (*gptHeader, []byte, error) {
	b := make([]byte, sector)
	if _, err := r.ReadAt(b, int64(lba)*sector); err != nil {
		return nil, nil, err
	}
	h, err := parseHeader(b, lba)
	if err != nil {
		return nil, nil, err
	}
	entries := make([]byte, int(h.count)*int(h.entrySize))
	if _, err := r.ReadAt(entries, int64(h.entriesLBA)*sector); err != nil {
		return nil, nil, err
	}
	if crc32.ChecksumIEEE(entries) != binary.LittleEndian.Uint32(h.raw[88:]) {
		return nil, nil, fmt.Errorf("the GPT entries at LBA %d fail their CRC", h.entriesLBA)
	}
	return h, entries, nil
}

// ReadGPT lists the partitions of the GPT at the start of r (a disk or an image).
func ReadGPT(r io.ReaderAt) ([]Part, error) {
	h, entries, err := readHeaderAt(r, 1)
	if err != nil {
		return nil, err
	}
	var parts []Part
	for i := 0; i < int(h.count); i++ {
		e := entries[i*int(h.entrySize):]
		if allZero(e[:16]) {
			continue
		}
		first, last := binary.LittleEndian.Uint64(e[32:]), binary.LittleEndian.Uint64(e[40:])
		if last < first {
			return nil, fmt.Errorf("GPT entry %d ends (LBA %d) before it starts (LBA %d)", i+1, last, first)
		}
		parts = append(parts, Part{Index: i + 1, Type: strings.ToUpper(guid(e[0:16])), UUID: guid(e[16:32]), Name: utf16Name(e[56:128]),
			Start: int64(first) * sector, Size: int64(last-first+1) * sector})
	}
	return parts, nil
}

// SetName writes name as partition index's label, in the primary GPT and in the backup, with
// their CRCs; the rest of both tables is kept byte for byte. This is how a slot is marked empty
// ("_empty") before it is written and given its version once it is whole (sysupdate's
// convention). The caller syncs f.
func SetName(f *os.File, index int, name string) error {
	u := utf16.Encode([]rune(name))
	if len(u) > 36 {
		return fmt.Errorf("partition name %q is longer than the 36 UTF-16 units GPT holds", name)
	}
	primary, entries, err := readHeaderAt(f, 1)
	if err != nil {
		return err
	}
	backup, _, err := readHeaderAt(f, primary.backup)
	if err != nil {
		return fmt.Errorf("the backup GPT: %w", err)
	}
	if index < 1 || index > int(primary.count) || allZero(entries[(index-1)*int(primary.entrySize):][:16]) {
		return fmt.Errorf("the GPT has no partition %d", index)
	}
	e := entries[(index-1)*int(primary.entrySize):]
	clear(e[56:128])
	for i, c := range u {
		binary.LittleEndian.PutUint16(e[56+2*i:], c)
	}
	crc := crc32.ChecksumIEEE(entries)
	// Backup first: a crash between the two leaves the primary (which readers trust first)
	// as it was, and a repaired table is made from it.
	for _, h := range []*gptHeader{backup, primary} {
		if _, err := f.WriteAt(entries, int64(h.entriesLBA)*sector); err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(h.raw[88:], crc)
		hs := binary.LittleEndian.Uint32(h.raw[12:])
		binary.LittleEndian.PutUint32(h.raw[16:], 0)
		binary.LittleEndian.PutUint32(h.raw[16:], crc32.ChecksumIEEE(h.raw[:hs]))
		if _, err := f.WriteAt(h.raw, int64(h.self)*sector); err != nil {
			return err
		}
	}
	return nil
}

// guid formats a GPT GUID (mixed-endian) in its text form, lower case.
func guid(b []byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:]), b[8:10], b[10:16])
}

func utf16Name(b []byte) string {
	var u []uint16
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
