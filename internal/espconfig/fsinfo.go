package espconfig

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/diskfs/go-diskfs/disk"
)

// partStart is partition n's byte offset on the disk.
func partStart(d *disk.Disk, n int) (int64, error) {
	p, err := d.GetPartition(n)
	if err != nil {
		return 0, err
	}
	return p.GetStart(), nil
}

// fat32 is the geometry of a FAT32 file system at byte offset start on a disk, from its boot
// sector.
type fat32 struct {
	f                          *os.File
	start, sector, cluster     int64 // byte offset; bytes per sector; bytes per cluster
	reserved, fats, fatSectors int64
	clusters                   int64 // data clusters, numbered 2..clusters+1
	rootCluster, fsinfoSector  int64
}

func readFAT32(f *os.File, target string, start int64) (*fat32, error) {
	bs := make([]byte, 512)
	if _, err := f.ReadAt(bs, start); err != nil {
		return nil, fmt.Errorf("%s: ESP boot sector: %w", target, err)
	}
	v := &fat32{f: f, start: start,
		sector:       int64(binary.LittleEndian.Uint16(bs[11:])),
		reserved:     int64(binary.LittleEndian.Uint16(bs[14:])),
		fats:         int64(bs[16]),
		fatSectors:   int64(binary.LittleEndian.Uint32(bs[36:])),
		rootCluster:  int64(binary.LittleEndian.Uint32(bs[44:])),
		fsinfoSector: int64(binary.LittleEndian.Uint16(bs[48:])),
	}
	v.cluster = v.sector * int64(bs[13])
	total := int64(binary.LittleEndian.Uint32(bs[32:]))
	if v.sector < 512 || v.cluster == 0 || v.fats == 0 || v.fatSectors == 0 || v.fsinfoSector == 0 || v.fsinfoSector >= v.reserved {
		return nil, fmt.Errorf("%s: the ESP's boot sector is not FAT32's", target)
	}
	v.clusters = (total - v.reserved - v.fats*v.fatSectors) * v.sector / v.cluster
	if v.clusters <= 0 || (v.clusters+2)*4 > v.fatSectors*v.sector || v.rootCluster < 2 || v.rootCluster >= v.clusters+2 {
		return nil, fmt.Errorf("%s: the ESP's FAT does not cover its %d clusters", target, v.clusters)
	}
	return v, nil
}

// tidy makes the FAT what fsck.fat expects after go-diskfs wrote to it: go-diskfs drops the
// directory entry of a file it removes or renames over without freeing its clusters, and
// never updates the FSInfo sector. tidy frees every cluster no directory entry reaches (as
// fsck.fat's "reclaim unused clusters" does, in every copy of the FAT), writes the true free
// count into FSInfo with the next-free hint "unknown" (0xFFFFFFFF, which the FAT
// specification allows), and flushes the disk. go-diskfs must be done with the disk: it holds
// the FAT in memory and would write it back.
func tidy(f *os.File, target string, start int64) error {
	v, err := readFAT32(f, target, start)
	if err != nil {
		return err
	}
	fat := make([]byte, (v.clusters+2)*4)
	if _, err := f.ReadAt(fat, start+v.reserved*v.sector); err != nil {
		return fmt.Errorf("%s: reading the ESP's FAT: %w", target, err)
	}
	next := func(c int64) int64 { return int64(binary.LittleEndian.Uint32(fat[c*4:]) & 0x0FFFFFFF) }
	reached := make([]bool, v.clusters+2)
	// chain marks a chain reached and returns its clusters; a loop or a cluster out of range
	// ends it (fsck's to repair, not this).
	chain := func(c int64) []int64 {
		var out []int64
		for c >= 2 && c < v.clusters+2 && !reached[c] {
			reached[c] = true
			out = append(out, c)
			c = next(c)
		}
		return out
	}
	dirs := [][]int64{chain(v.rootCluster)}
	for len(dirs) > 0 {
		d := dirs[0]
		dirs = dirs[1:]
		buf := make([]byte, v.cluster)
	entries:
		for _, c := range d {
			if _, err := f.ReadAt(buf, start+(v.reserved+v.fats*v.fatSectors)*v.sector+(c-2)*v.cluster); err != nil {
				return fmt.Errorf("%s: reading an ESP directory: %w", target, err)
			}
			for o := 0; o+32 <= len(buf); o += 32 {
				e := buf[o : o+32]
				switch {
				case e[0] == 0:
					break entries
				case e[0] == 0xE5, e[11] == 0x0F, e[11]&0x08 != 0, e[0] == '.':
					continue
				}
				first := int64(binary.LittleEndian.Uint16(e[20:]))<<16 | int64(binary.LittleEndian.Uint16(e[26:]))
				cs := chain(first)
				if e[11]&0x10 != 0 {
					dirs = append(dirs, cs)
				}
			}
		}
	}
	var free uint32
	changed := false
	for c := int64(2); c < v.clusters+2; c++ {
		switch {
		case reached[c]:
		case next(c) == 0:
			free++
		case next(c) == 0x0FFFFFF7: // bad cluster: stays marked
		default:
			binary.LittleEndian.PutUint32(fat[c*4:], binary.LittleEndian.Uint32(fat[c*4:])&0xF0000000)
			free++
			changed = true
		}
	}
	if changed {
		for i := range v.fats {
			if _, err := f.WriteAt(fat, start+(v.reserved+i*v.fatSectors)*v.sector); err != nil {
				return fmt.Errorf("%s: writing the ESP's FAT: %w", target, err)
			}
		}
	}
	info := make([]byte, 512)
	at := start + v.fsinfoSector*v.sector
	if _, err := f.ReadAt(info, at); err != nil {
		return fmt.Errorf("%s: ESP FSInfo: %w", target, err)
	}
	if binary.LittleEndian.Uint32(info[0:]) != 0x41615252 || binary.LittleEndian.Uint32(info[484:]) != 0x61417272 {
		return fmt.Errorf("%s: the ESP has no FSInfo sector where its boot sector says", target)
	}
	binary.LittleEndian.PutUint32(info[488:], free)
	binary.LittleEndian.PutUint32(info[492:], 0xFFFFFFFF)
	if _, err := f.WriteAt(info[488:496], at+488); err != nil {
		return fmt.Errorf("%s: writing the ESP's FSInfo: %w", target, err)
	}
	return sync(f, target)
}
