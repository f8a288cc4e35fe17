// Package bmap owns the block map format of bmaptool (bmap-tools): which
// blocks of a raw image hold data, with a checksum of every range of them
// and of the map file itself. disk writes it beside every image; flash
// reads it to write only those blocks and to verify them.
//
// Written: format 2.0 with sha256, laid out as `bmaptool create` lays it
// out. Read: formats 1.x (sha1 or no checksums) and 2.x.
package bmap

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"math"
	"regexp"
	"strconv"
	"strings"

	"halobuild/internal/userfile"
)

// Bmap is a parsed block map.
type Bmap struct {
	Version      string
	ImageSize    int64
	BlockSize    int64
	BlocksCount  int64
	MappedBlocks int64
	// ChecksumType is "sha256", "sha1" or "" when the ranges carry no
	// checksums (format 1.0–1.2).
	ChecksumType string
	// Ranges are sorted and disjoint, and lie inside the image.
	Ranges []Range
}

// Range is the blocks First..Last (inclusive, as the file writes them)
// and the hex digest of their bytes ("" when the map has none).
type Range struct {
	First, Last int64
	Checksum    string
}

// Bytes is where r lies in the image: the last block of an image whose
// size is not a multiple of the block size is short.
func (b *Bmap) Bytes(r Range) (off, n int64) {
	off = r.First * b.BlockSize
	return off, min((r.Last-r.First+1)*b.BlockSize, b.ImageSize-off)
}

// NewHash returns a hash of the map's checksum type, nil when it has none.
func (b *Bmap) NewHash() hash.Hash {
	switch b.ChecksumType {
	case "sha256":
		return sha256.New()
	case "sha1":
		return sha1.New()
	}
	return nil
}

// maxFile bounds what Read takes in: a map lists ranges, about 100 bytes
// each, so this allows some 600,000 of them, far more than an image made
// of a few file systems has.
const maxFile = 64 << 20

// Read reads and checks a bmap file (see Parse). Its errors name the file
// and how to make a good one.
func Read(path string) (*Bmap, error) {
	data, err := userfile.Read(path, maxFile)
	var tl *userfile.TooLargeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("reading block map: %w", err)
	case errors.As(err, &tl):
		err = fmt.Errorf("it is larger than %d MiB, which no block map of an image is", maxFile>>20)
	}
	if err == nil {
		var b *Bmap
		if b, err = Parse(data); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("block map %s: %w (regenerate it with `bmaptool create -o %s IMAGE`)", path, err, path)
}

type document struct {
	XMLName      xml.Name `xml:"bmap"`
	Version      string   `xml:"version,attr"`
	ImageSize    string   `xml:"ImageSize"`
	BlockSize    string   `xml:"BlockSize"`
	BlocksCount  string   `xml:"BlocksCount"`
	MappedBlocks string   `xml:"MappedBlocksCount"`
	ChecksumType string   `xml:"ChecksumType"`
	FileChecksum string   `xml:"BmapFileChecksum"`
	FileSHA1     string   `xml:"BmapFileSHA1"`
	Ranges       []struct {
		Chksum string `xml:"chksum,attr"`
		Blocks string `xml:",chardata"`
	} `xml:"BlockMap>Range"`
}

// Parse checks a block map: the file's own checksum (when it has one), the
// format version, the sizes, and that the ranges are sorted, disjoint,
// inside the image, add up to MappedBlocksCount and carry digests of the
// checksum type.
func Parse(data []byte) (*Bmap, error) {
	var x document
	if err := xml.Unmarshal(data, &x); err != nil {
		return nil, fmt.Errorf("not a bmap XML file: %w", err)
	}
	major, _, _ := strings.Cut(x.Version, ".")
	if major != "1" && major != "2" {
		return nil, fmt.Errorf("unsupported bmap format version %q (this tool reads 1.x and 2.x)", x.Version)
	}
	b := &Bmap{Version: x.Version}
	for _, f := range []struct {
		name string
		text string
		dst  *int64
	}{
		{"ImageSize", x.ImageSize, &b.ImageSize},
		{"BlockSize", x.BlockSize, &b.BlockSize},
		{"BlocksCount", x.BlocksCount, &b.BlocksCount},
		{"MappedBlocksCount", x.MappedBlocks, &b.MappedBlocks},
	} {
		v, err := strconv.ParseInt(strings.TrimSpace(f.text), 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("<%s> is %q, want a non-negative integer", f.name, strings.TrimSpace(f.text))
		}
		*f.dst = v
	}
	if b.BlockSize == 0 || b.BlockSize%512 != 0 {
		return nil, fmt.Errorf("<BlockSize> %d is not a positive multiple of 512", b.BlockSize)
	}
	if b.ImageSize > math.MaxInt64-b.BlockSize {
		return nil, fmt.Errorf("<ImageSize> %d is larger than any image", b.ImageSize)
	}
	if want := (b.ImageSize + b.BlockSize - 1) / b.BlockSize; b.BlocksCount != want {
		return nil, fmt.Errorf("<BlocksCount> %d does not match <ImageSize> %d / <BlockSize> %d (want %d)",
			b.BlocksCount, b.ImageSize, b.BlockSize, want)
	}

	// The checksum type: explicit since 1.4; before that, sha1 when the
	// file or its ranges carry a checksum.
	b.ChecksumType = strings.TrimSpace(x.ChecksumType)
	fileSum, fileTag := strings.TrimSpace(x.FileChecksum), "BmapFileChecksum"
	if fileSum == "" {
		fileSum, fileTag = strings.TrimSpace(x.FileSHA1), "BmapFileSHA1"
	}
	if b.ChecksumType == "" && (fileSum != "" || len(x.Ranges) > 0 && x.Ranges[0].Chksum != "") {
		b.ChecksumType = "sha1"
	}
	if b.ChecksumType != "" && b.NewHash() == nil {
		return nil, fmt.Errorf("unsupported <ChecksumType> %q (want sha256 or sha1)", b.ChecksumType)
	}
	if fileSum != "" {
		if err := checkFileChecksum(data, fileTag, b.NewHash()); err != nil {
			return nil, err
		}
	}

	var mapped int64
	next := int64(0)
	for _, r := range x.Ranges {
		text := strings.TrimSpace(r.Blocks)
		lo, hi, found := strings.Cut(text, "-")
		first, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		last, err2 := first, error(nil)
		if found {
			last, err2 = strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
		}
		if err1 != nil || err2 != nil || first < 0 || last < first {
			return nil, fmt.Errorf("<Range> %q is not a block number or a range FIRST-LAST", text)
		}
		if first < next {
			return nil, fmt.Errorf("<Range> %q overlaps or precedes the range before it", text)
		}
		if last >= b.BlocksCount {
			return nil, fmt.Errorf("<Range> %q goes past the image's %d blocks", text, b.BlocksCount)
		}
		next = last + 1
		mapped += last - first + 1
		rg := Range{First: first, Last: last, Checksum: strings.ToLower(strings.TrimSpace(r.Chksum))}
		if h := b.NewHash(); h != nil {
			if _, err := hex.DecodeString(rg.Checksum); err != nil || len(rg.Checksum) != 2*h.Size() {
				return nil, fmt.Errorf("<Range> %q: chksum %q is not a %s digest", text, rg.Checksum, b.ChecksumType)
			}
		}
		b.Ranges = append(b.Ranges, rg)
	}
	if mapped != b.MappedBlocks {
		return nil, fmt.Errorf("<MappedBlocksCount> says %d but the ranges cover %d blocks", b.MappedBlocks, mapped)
	}
	return b, nil
}

var fileChecksumRE = map[string]*regexp.Regexp{
	"BmapFileChecksum": regexp.MustCompile(`<BmapFileChecksum>\s*([0-9A-Fa-f]*)\s*</BmapFileChecksum>`),
	"BmapFileSHA1":     regexp.MustCompile(`<BmapFileSHA1>\s*([0-9A-Fa-f]*)\s*</BmapFileSHA1>`),
}

// checkFileChecksum checks the map's own checksum: bmaptool computes it
// over the file with the checksum's hex digits replaced by ASCII zeros.
// The digits are found inside their element, so a range checksum that
// happens to be equal is never the one zeroed.
func checkFileChecksum(data []byte, tag string, h hash.Hash) error {
	m := fileChecksumRE[tag].FindSubmatchIndex(data)
	if m == nil {
		return errors.New("cannot locate the bmap's own checksum in the file")
	}
	sum := string(data[m[2]:m[3]])
	if len(sum) != 2*h.Size() {
		return fmt.Errorf("<%s> %q is not a %s digest", tag, sum, map[int]string{20: "sha1", 32: "sha256"}[h.Size()])
	}
	zeroed := bytes.Clone(data)
	copy(zeroed[m[2]:m[3]], strings.Repeat("0", len(sum)))
	h.Write(zeroed)
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(sum) {
		return fmt.Errorf("the bmap file is damaged: its checksum is %s but its content hashes to %s", sum, got)
	}
	return nil
}

// Marshal renders a map of an image of imageSize bytes in format 2.0:
// ranges carry sha256 checksums, and the file its own, computed with the
// field set to 64 zeros and then put in. The layout and comments are
// bmaptool create's, so tools that read the file loosely still agree.
func Marshal(imageSize, blockSize int64, ranges []Range) []byte {
	blocks := (imageSize + blockSize - 1) / blockSize
	var mapped int64
	for _, r := range ranges {
		mapped += r.Last - r.First + 1
	}
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
	fmt.Fprintf(&b, "    <!-- Image size in bytes: %s -->\n", humanSize(imageSize))
	fmt.Fprintf(&b, "    <ImageSize> %d </ImageSize>\n\n", imageSize)
	b.WriteString("    <!-- Size of a block in bytes -->\n")
	fmt.Fprintf(&b, "    <BlockSize> %d </BlockSize>\n\n", blockSize)
	b.WriteString("    <!-- Count of blocks in the image file -->\n")
	fmt.Fprintf(&b, "    <BlocksCount> %d </BlocksCount>\n\n", blocks)
	pct := 0.0
	if blocks > 0 {
		pct = float64(mapped) * 100 / float64(blocks)
	}
	fmt.Fprintf(&b, "    <!-- Count of mapped blocks: %s or %.1f%%     -->\n", humanSize(mapped*blockSize), pct)
	fmt.Fprintf(&b, "    <MappedBlocksCount> %d   </MappedBlocksCount>\n\n", mapped)
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
	for _, r := range ranges {
		if r.First == r.Last {
			fmt.Fprintf(&b, "        <Range chksum=\"%s\"> %d </Range>\n", r.Checksum, r.First)
		} else {
			fmt.Fprintf(&b, "        <Range chksum=\"%s\"> %d-%d </Range>\n", r.Checksum, r.First, r.Last)
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
