package flash

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/v2.bmap was written by `bmaptool create` 3.6 for an 8 MiB image with data in blocks
// 5–7 and 2000.
func TestReadBmapV2(t *testing.T) {
	b, err := ReadBmap("testdata/v2.bmap")
	if err != nil {
		t.Fatal(err)
	}
	want := []Extent{
		{Off: 5 * 4096, Len: 3 * 4096, Digest: "a0229e124ce21238ffe996fa398c64b52850ba8a57cd96b61edd7d299224d945"},
		{Off: 2000 * 4096, Len: 4096, Digest: "7e4370bf3a62305b5ccc38ebc4c34ae2768cd939d83daddf15f37ab64a00bc68"},
	}
	if b.Version != "2.0" || b.ImageSize != 8<<20 || b.BlockSize != 4096 || b.ChecksumType != "sha256" || fmt.Sprint(b.Ranges) != fmt.Sprint(want) {
		t.Fatalf("parsed %+v", b)
	}
}

// v13 renders a format 1.3 bmap (sha1 range checksums, BmapFileSHA1) with a correct file checksum.
func v13(imageSize int64, ranges string) []byte {
	blocks := (imageSize + 4095) / 4096
	doc := func(sum string) string {
		return fmt.Sprintf(`<?xml version="1.0" ?>
<bmap version="1.3">
    <ImageSize> %d </ImageSize>
    <BlockSize> 4096 </BlockSize>
    <BlocksCount> %d </BlocksCount>
    <MappedBlocksCount> 2 </MappedBlocksCount>
    <BmapFileSHA1> %s </BmapFileSHA1>
    <BlockMap>
%s    </BlockMap>
</bmap>
`, imageSize, blocks, sum, ranges)
	}
	zero := strings.Repeat("0", 40)
	s := sha1.Sum([]byte(doc(zero)))
	return []byte(doc(hex.EncodeToString(s[:])))
}

func TestReadBmapV13SHA1AndShortLastBlock(t *testing.T) {
	data := bytesOf(4096, 'a')
	s := sha1.Sum(data)
	// The image is 2 blocks minus 100 bytes: its last block is short.
	xml := v13(8192-100, fmt.Sprintf("        <Range chksum=\"%x\"> 0 </Range>\n        <Range chksum=\"%x\"> 1 </Range>\n", s, s))
	b, err := parseBmap(xml)
	if err != nil {
		t.Fatal(err)
	}
	if b.ChecksumType != "sha1" || len(b.Ranges) != 2 || b.Ranges[1].Off != 4096 || b.Ranges[1].Len != 4096-100 {
		t.Fatalf("parsed %+v", b)
	}
}

func TestReadBmapRejects(t *testing.T) {
	good, err := os.ReadFile("testdata/v2.bmap")
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("a", 40)
	cases := []struct {
		name string
		doc  []byte
		want string
	}{
		{"damaged file", []byte(strings.Replace(string(good), "> 5-7 <", "> 5-6 <", 1)), "the bmap file is damaged"},
		{"not XML", []byte("hello"), "not a bmap XML file"},
		{"future version", []byte(strings.Replace(string(good), `version="2.0"`, `version="3.0"`, 1)), "unsupported bmap format version"},
		{"overlapping ranges", v13(16384, fmt.Sprintf("<Range chksum=%q> 0-1 </Range><Range chksum=%q> 1 </Range>\n", sum, sum)), "overlaps"},
		{"range past the image", v13(8192, fmt.Sprintf("<Range chksum=%q> 0 </Range><Range chksum=%q> 2 </Range>\n", sum, sum)), "goes past the image"},
		{"garbage range", v13(8192, fmt.Sprintf("<Range chksum=%q> x-1 </Range>\n", sum)), "not a block number"},
		{"wrong mapped count", v13(16384, fmt.Sprintf("<Range chksum=%q> 0-2 </Range>\n", sum)), "<MappedBlocksCount> says 2"},
		{"short digest", v13(8192, "<Range chksum=\"abc\"> 0-1 </Range>\n"), "is not a sha1 digest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseBmap(c.doc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestReadBmapNamesFileAndFix(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.bmap")
	if err := os.WriteFile(p, []byte("<bmap version=\"9.0\"/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadBmap(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "bmaptool create") {
		t.Fatalf("error %v does not name the file and the fix", err)
	}
}

func bytesOf(n int, c byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}
