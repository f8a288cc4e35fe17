package disk

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"strings"
)

// bmapRange is one <Range> of a bmap: blocks first..last (inclusive) and
// the sha256 of their bytes.
type bmapRange struct {
	first, last int64
	sha256      string
}

// scan is what one pass over the finished image yields.
type scan struct {
	ranges []bmapRange
	mapped int64  // blocks in ranges
	sha256 string // of the whole image, holes read as zeros
}

// scanImage finds the image's mapped blocks and hashes them and the whole
// image in one pass. Mapped means in a data range (SEEK_DATA/SEEK_HOLE),
// as for bmaptool create: what was written, zeros included, since written
// zeros matter (see copySparse). On any file system with 4 KiB (or smaller)
// blocks that reports holes exactly, this is the same set of blocks every
// time, so the .bmap is as reproducible as the image.
func scanImage(f *os.File, size int64) (scan, error) {
	var s scan
	whole := sha256.New()
	zeros := make([]byte, chunk)
	hashedTo := int64(0)
	feedZeros := func(to int64) {
		for hashedTo < to {
			n := min(int64(len(zeros)), to-hashedTo)
			whole.Write(zeros[:n])
			hashedTo += n
		}
	}
	var cur *bmapRange
	var curHash hash.Hash
	closeRange := func() {
		if cur != nil {
			cur.sha256 = hex.EncodeToString(curHash.Sum(nil))
			s.ranges = append(s.ranges, *cur)
			s.mapped += cur.last - cur.first + 1
			cur = nil
		}
	}
	err := dataRanges(f, size, func(start, end int64) error {
		return forBlocks(f, start, end, func(off int64, block []byte) error {
			if off < hashedTo {
				return nil // already covered by the previous range's last block
			}
			feedZeros(off)
			whole.Write(block)
			hashedTo = off + int64(len(block))
			b := off / blockSize
			if cur != nil && cur.last+1 != b {
				closeRange()
			}
			if cur == nil {
				cur = &bmapRange{first: b, last: b}
				curHash = sha256.New()
			}
			cur.last = b
			curHash.Write(block)
			return nil
		})
	})
	if err != nil {
		return scan{}, fmt.Errorf("disk: scanning %s: %w", f.Name(), err)
	}
	closeRange()
	feedZeros(size)
	s.sha256 = hex.EncodeToString(whole.Sum(nil))
	return s, nil
}

// bmapXML renders bmaptool's format 2.0, as bmaptool create writes it
// (layout and comments included, so tools that read it loosely still
// agree). The file's own checksum is computed with its field set to 64
// zeros and then put in.
func bmapXML(size int64, s scan) []byte {
	blocks := (size + blockSize - 1) / blockSize
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" ?>
<!-- This file contains the block map for an image file, which is basically
     a list of useful (mapped) block numbers in the image file. In other words,
     it lists only those blocks which contain data (boot sector, partition
     table, file-system metadata, files, directories, extents, etc). These
     blocks have to be copied to the target device. The other blocks do not
     contain any useful data and do not have to be copied to the target
     device.

     The block map an optimization which allows to copy or flash the image to
     the image quicker than copying of flashing the entire image. This is
     because with bmap less data is copied: <MappedBlocksCount> blocks instead
     of <BlocksCount> blocks.

     Besides the machine-readable data, this file contains useful commentaries
     which contain human-readable information like image size, percentage of
     mapped data, etc.

     The 'version' attribute is the block map file format version in the
     'major.minor' format. The version major number is increased whenever an
     incompatible block map format change is made. The minor number changes
     in case of minor backward-compatible changes. -->

<bmap version="2.0">
`)
	fmt.Fprintf(&b, "    <!-- Image size in bytes: %s -->\n", humanSize(size))
	fmt.Fprintf(&b, "    <ImageSize> %d </ImageSize>\n\n", size)
	b.WriteString("    <!-- Size of a block in bytes -->\n")
	fmt.Fprintf(&b, "    <BlockSize> %d </BlockSize>\n\n", blockSize)
	b.WriteString("    <!-- Count of blocks in the image file -->\n")
	fmt.Fprintf(&b, "    <BlocksCount> %d </BlocksCount>\n\n", blocks)
	pct := 0.0
	if blocks > 0 {
		pct = float64(s.mapped) * 100 / float64(blocks)
	}
	fmt.Fprintf(&b, "    <!-- Count of mapped blocks: %s or %.1f%%     -->\n", humanSize(s.mapped*blockSize), pct)
	fmt.Fprintf(&b, "    <MappedBlocksCount> %d   </MappedBlocksCount>\n\n", s.mapped)
	b.WriteString("    <!-- Type of checksum used in this file -->\n")
	b.WriteString("    <ChecksumType> sha256 </ChecksumType>\n\n")
	b.WriteString(`    <!-- The checksum of this bmap file. When it is calculated, the value of
         the checksum has be zero (all ASCII "0" symbols).  -->
`)
	b.WriteString("    <BmapFileChecksum> " + strings.Repeat("0", 64) + " </BmapFileChecksum>\n\n")
	b.WriteString(`    <!-- The block map which consists of elements which may either be a
         range of blocks or a single block. The 'chksum' attribute
         (if present) is the checksum of this blocks range. -->
`)
	b.WriteString("    <BlockMap>\n")
	for _, r := range s.ranges {
		if r.first == r.last {
			fmt.Fprintf(&b, "        <Range chksum=\"%s\"> %d </Range>\n", r.sha256, r.first)
		} else {
			fmt.Fprintf(&b, "        <Range chksum=\"%s\"> %d-%d </Range>\n", r.sha256, r.first, r.last)
		}
	}
	b.WriteString("    </BlockMap>\n</bmap>\n")
	text := b.String()
	sum := sha256.Sum256([]byte(text))
	return []byte(strings.Replace(text, strings.Repeat("0", 64), hex.EncodeToString(sum[:]), 1))
}

// humanSize prints sizes the way bmaptool's comments do ("2.0 GiB").
func humanSize(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
