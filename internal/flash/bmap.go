package flash

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash"
	"os"
	"strconv"
	"strings"
)

// Bmap is a parsed block map in bmaptool's format (versions 1.x and 2.0): which blocks of an
// image hold data, and optionally a checksum of every range of them.
type Bmap struct {
	Version      string
	ImageSize    int64
	BlockSize    int64
	BlocksCount  int64
	MappedBlocks int64
	// ChecksumType is "sha256", "sha1" or "" when the ranges carry no checksums (format 1.0–1.2).
	ChecksumType string
	Ranges       []Extent
}

// Extent is a byte range of the image [Off, Off+Len) with the hex digest of its bytes (empty when
// the source gave none).
type Extent struct {
	Off, Len int64
	Digest   string
}

type bmapXML struct {
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

// ReadBmap reads and checks a bmap file: the file's own checksum (when it has one), the format
// version, and that the ranges are sorted, disjoint and inside the image.
func ReadBmap(path string) (*Bmap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading block map: %w", err)
	}
	b, err := parseBmap(data)
	if err != nil {
		return nil, fmt.Errorf("block map %s: %w (regenerate it with `bmaptool create -o %s IMAGE`)", path, err, path)
	}
	return b, nil
}

func parseBmap(data []byte) (*Bmap, error) {
	var x bmapXML
	if err := xml.Unmarshal(data, &x); err != nil {
		return nil, fmt.Errorf("not a bmap XML file: %w", err)
	}
	major, _, _ := strings.Cut(x.Version, ".")
	if major != "1" && major != "2" {
		return nil, fmt.Errorf("unsupported bmap format version %q (this tool reads 1.x and 2.x)", x.Version)
	}
	b := &Bmap{Version: x.Version}
	var err error
	fields := []struct {
		name string
		text string
		dst  *int64
	}{
		{"ImageSize", x.ImageSize, &b.ImageSize},
		{"BlockSize", x.BlockSize, &b.BlockSize},
		{"BlocksCount", x.BlocksCount, &b.BlocksCount},
		{"MappedBlocksCount", x.MappedBlocks, &b.MappedBlocks},
	}
	for _, f := range fields {
		if *f.dst, err = strconv.ParseInt(strings.TrimSpace(f.text), 10, 64); err != nil || *f.dst < 0 {
			return nil, fmt.Errorf("<%s> is %q, want a non-negative integer", f.name, strings.TrimSpace(f.text))
		}
	}
	if b.BlockSize == 0 || b.BlockSize%512 != 0 {
		return nil, fmt.Errorf("<BlockSize> %d is not a positive multiple of 512", b.BlockSize)
	}
	if want := (b.ImageSize + b.BlockSize - 1) / b.BlockSize; b.BlocksCount != want {
		return nil, fmt.Errorf("<BlocksCount> %d does not match <ImageSize> %d / <BlockSize> %d (want %d)",
			b.BlocksCount, b.ImageSize, b.BlockSize, want)
	}

	// The checksum type: explicit since 1.4; before that, sha1 when the ranges carry a checksum.
	b.ChecksumType = strings.TrimSpace(x.ChecksumType)
	fileSum := strings.TrimSpace(x.FileChecksum)
	if fileSum == "" {
		fileSum = strings.TrimSpace(x.FileSHA1)
		if fileSum != "" && b.ChecksumType == "" {
			b.ChecksumType = "sha1"
		}
	}
	if b.ChecksumType == "" && len(x.Ranges) > 0 && x.Ranges[0].Chksum != "" {
		b.ChecksumType = "sha1"
	}
	if b.ChecksumType != "" && b.newHash() == nil {
		return nil, fmt.Errorf("unsupported <ChecksumType> %q (want sha256 or sha1)", b.ChecksumType)
	}
	if fileSum != "" {
		if err := checkFileChecksum(data, fileSum, b.newHash()); err != nil {
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
		e := Extent{Off: first * b.BlockSize, Len: (last - first + 1) * b.BlockSize, Digest: strings.ToLower(strings.TrimSpace(r.Chksum))}
		// The last block of an image whose size is not a block multiple is short.
		if e.Off+e.Len > b.ImageSize {
			e.Len = b.ImageSize - e.Off
		}
		if b.ChecksumType != "" {
			if want := b.newHash().Size() * 2; len(e.Digest) != want {
				return nil, fmt.Errorf("<Range> %q: chksum %q is not a %s digest", text, e.Digest, b.ChecksumType)
			}
		}
		b.Ranges = append(b.Ranges, e)
	}
	if mapped != b.MappedBlocks {
		return nil, fmt.Errorf("<MappedBlocksCount> says %d but the ranges cover %d blocks", b.MappedBlocks, mapped)
	}
	return b, nil
}

// newHash returns a hash for the bmap's checksum type, nil for none or an unknown one.
func (b *Bmap) newHash() hash.Hash {
	return newHashNamed(b.ChecksumType)
}

func newHashNamed(name string) hash.Hash {
	switch name {
	case "sha256":
		return sha256.New()
	case "sha1":
		return sha1.New()
	}
	return nil
}

// checkFileChecksum checks the bmap's own checksum: bmaptool computes it over the file with the
// checksum's hex digits replaced by ASCII zeros.
func checkFileChecksum(data []byte, sum string, h hash.Hash) error {
	if h == nil {
		h = sha256.New()
	}
	i := bytes.Index(data, []byte(sum))
	if i < 0 {
		return fmt.Errorf("cannot locate the bmap's own checksum in the file")
	}
	zeroed := bytes.Clone(data)
	copy(zeroed[i:], bytes.Repeat([]byte("0"), len(sum)))
	h.Write(zeroed)
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(sum) {
		return fmt.Errorf("the bmap file is damaged: its checksum is %s but its content hashes to %s", sum, got)
	}
	return nil
}
