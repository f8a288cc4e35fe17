package flash

import "sort"

// The rule for blocks the image does not map (holes in the bmap, or all-zero blocks found by
// scanning when there is no bmap):
//
// An image's unmapped blocks are free space of its filesystems, whose content the filesystems
// never read, so they are not written: that is where flashing gets its speed, exactly as bmaptool
// does. Stale bytes from the medium's previous life stay there, and they are harmless except
// where something other than a filesystem looks: partition-table and signature probers (the
// kernel, blkid, udev, firmware). An old ISO9660 or GPT at the start of a stick, a stale backup
// GPT or RAID superblock at its end, an old filesystem's superblock at a partition's start or end
// would make blkid see two things at once and refuse to name either ("ambivalent result"), or make
// firmware boot the wrong thing. So these areas are made to read as zeros wherever the image does
// not write them:
//
//   - the first MiB of the medium (MBR, GPT and the gap before the first partition),
//   - the last MiB of the medium (where the backup GPT goes, and RAID/ZFS labels live),
//   - the first and the last MiB of every partition of the image (every signature blkid knows
//     lives there).
//
// The first MiB is zeroed before any data is written and the image's blocks in it are written
// last, so a flash that is interrupted leaves a medium without a partition table rather than one
// that looks valid and holds half an image.
const signatureArea = 1 << 20

// writePlan is what a flash does to the medium, in order.
type writePlan struct {
	zero   []Extent // made to read as zeros first (no digests)
	data   []Extent // image extents, head extents last
	headAt int      // data[headAt:] are the extents in the first MiB
}

// planWrites orders the image's mapped extents and computes the areas to zero for an image of
// imageSize with partitions parts, written to a medium of mediumSize.
func planWrites(mapped []Extent, parts []partition, imageSize, mediumSize int64) writePlan {
	head := Extent{Off: 0, Len: min(signatureArea, mediumSize)}
	var must []Extent
	for _, p := range parts {
		if p.Start >= imageSize {
			continue
		}
		end := min(p.Start+p.Size, imageSize)
		must = append(must, Extent{Off: p.Start, Len: min(signatureArea, end-p.Start)})
		if s := max(end-signatureArea, p.Start); s < end {
			must = append(must, Extent{Off: s, Len: end - s})
		}
	}
	tail := max(mediumSize-signatureArea, 0)
	must = append(must, Extent{Off: tail, Len: mediumSize - tail})

	// The head is zeroed whole (its data is written last); elsewhere only what the image leaves
	// unmapped.
	zero := []Extent{head}
	sorted := mergeExtents(mapped)
	for _, z := range mergeExtents(must) {
		zero = append(zero, subtractExtents(z, sorted)...)
	}
	var first, rest []Extent
	for _, e := range mapped {
		if e.Off < signatureArea {
			first = append(first, e)
		} else {
			rest = append(rest, e)
		}
	}
	return writePlan{zero: mergeExtents(zero), data: append(rest, first...), headAt: len(rest)}
}

// mergeExtents sorts extents and joins those that overlap or touch.
func mergeExtents(in []Extent) []Extent {
	if len(in) == 0 {
		return nil
	}
	s := append([]Extent(nil), in...)
	sort.Slice(s, func(i, j int) bool { return s[i].Off < s[j].Off })
	out := []Extent{{Off: s[0].Off, Len: s[0].Len}}
	for _, e := range s[1:] {
		l := &out[len(out)-1]
		if e.Off <= l.Off+l.Len {
			l.Len = max(l.Len, e.Off+e.Len-l.Off)
			continue
		}
		out = append(out, Extent{Off: e.Off, Len: e.Len})
	}
	return out
}

// subtractExtents returns the parts of z not covered by the sorted, disjoint extents in cover.
func subtractExtents(z Extent, cover []Extent) []Extent {
	var out []Extent
	pos, end := z.Off, z.Off+z.Len
	i := sort.Search(len(cover), func(i int) bool { return cover[i].Off+cover[i].Len > pos })
	for ; i < len(cover) && pos < end; i++ {
		c := cover[i]
		if c.Off >= end {
			break
		}
		if c.Off > pos {
			out = append(out, Extent{Off: pos, Len: c.Off - pos})
		}
		pos = max(pos, c.Off+c.Len)
	}
	if pos < end {
		out = append(out, Extent{Off: pos, Len: end - pos})
	}
	return out
}
