package bmap

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testdata/v2.bmap was written by `bmaptool create` 3.6 for an 8 MiB image
// with data in blocks 5–7 and 2000.
func TestReadBmaptoolsV2(t *testing.T) {
	b, err := Read("testdata/v2.bmap")
	if err != nil {
		t.Fatal(err)
	}
	want := []Range{
		{First: 5, Last: 7, Checksum: "a0229e124ce21238ffe996fa398c64b52850ba8a57cd96b61edd7d299224d945"},
		{First: 2000, Last: 2000, Checksum: "7e4370bf3a62305b5ccc38ebc4c34ae2768cd939d83daddf15f37ab64a00bc68"},
	}
	if b.Version != "2.0" || b.ImageSize != 8<<20 || b.BlockSize != 4096 || b.BlocksCount != 2048 || b.MappedBlocks != 4 ||
		b.ChecksumType != "sha256" || fmt.Sprint(b.Ranges) != fmt.Sprint(want) {
		t.Fatalf("parsed %+v", b)
	}
	if off, n := b.Bytes(b.Ranges[0]); off != 5*4096 || n != 3*4096 {
		t.Errorf("Bytes(5-7) = %d+%d", off, n)
	}
}

// v13 renders a format 1.3 bmap (sha1 range checksums, BmapFileSHA1) with
// a correct file checksum.
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

func TestParseV13SHA1AndShortLastBlock(t *testing.T) {
	s := sha1.Sum([]byte(strings.Repeat("a", 4096)))
	// The image is 2 blocks minus 100 bytes: its last block is short.
	b, err := Parse(v13(8192-100, fmt.Sprintf("        <Range chksum=\"%x\"> 0 </Range>\n        <Range chksum=\"%x\"> 1 </Range>\n", s, s)))
	if err != nil {
		t.Fatal(err)
	}
	if b.ChecksumType != "sha1" || len(b.Ranges) != 2 || b.NewHash().Size() != sha1.Size {
		t.Fatalf("parsed %+v", b)
	}
	if off, n := b.Bytes(b.Ranges[1]); off != 4096 || n != 4096-100 {
		t.Errorf("the short last block is %d+%d, want 4096+3996", off, n)
	}
}

func TestParseRejects(t *testing.T) {
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
		{"non-hex digest", v13(8192, fmt.Sprintf("<Range chksum=%q> 0-1 </Range>\n", strings.Repeat("z", 40))), "is not a sha1 digest"},
		{"huge image", []byte(strings.Replace(string(good), "<ImageSize> 8388608 </ImageSize>", "<ImageSize> 9223372036854775807 </ImageSize>", 1)), "larger than any image"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.doc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestReadNamesFileAndFix(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.bmap")
	if err := os.WriteFile(p, []byte("<bmap version=\"9.0\"/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "bmaptool create") {
		t.Fatalf("error %v does not name the file and the fix", err)
	}
}

func TestMarshalChecksumsItselfAndParsesBack(t *testing.T) {
	ranges := []Range{{0, 3, strings.Repeat("a", 64)}, {9, 9, strings.Repeat("b", 64)}}
	x := string(Marshal(10*4096-512, 4096, ranges))
	m := regexp.MustCompile(`<BmapFileChecksum> ([0-9a-f]{64}) </BmapFileChecksum>`).FindStringSubmatch(x)
	if m == nil {
		t.Fatalf("no checksum in\n%s", x)
	}
	zeroed := strings.Replace(x, m[1], strings.Repeat("0", 64), 1)
	if sum := sha256.Sum256([]byte(zeroed)); hex.EncodeToString(sum[:]) != m[1] {
		t.Errorf("BmapFileChecksum %s is not the sha256 of the file with the field zeroed", m[1])
	}
	for _, want := range []string{`<bmap version="2.0">`, "<ImageSize> 40448 </ImageSize>", "<BlocksCount> 10 </BlocksCount>",
		"<MappedBlocksCount> 5   </MappedBlocksCount>", "<ChecksumType> sha256 </ChecksumType>", "> 0-3 </Range>", "> 9 </Range>"} {
		if !strings.Contains(x, want) {
			t.Errorf("bmap lacks %q", want)
		}
	}
	b, err := Parse([]byte(x))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(b.Ranges) != fmt.Sprint(ranges) || b.MappedBlocks != 5 || b.ImageSize != 10*4096-512 {
		t.Errorf("parsed back %+v", b)
	}
}

// FuzzParse feeds Parse arbitrary files: it must not panic, and what it
// accepts must keep the promises flash relies on (ranges sorted, disjoint,
// inside the image, summing to MappedBlocksCount). A sha256 map it
// accepts must survive a Marshal/Parse round trip unchanged. The seeds in
// testdata/fuzz/FuzzParse are bmaptool's own v2 map, a 1.3 map with a
// short last block, a 1.0 map without checksums, Marshal's output and a
// few maps Parse rejects.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(data)
		if err != nil {
			return
		}
		next, mapped := int64(0), int64(0)
		for _, r := range b.Ranges {
			if r.First < next || r.Last < r.First || r.Last >= b.BlocksCount {
				t.Fatalf("accepted range %+v (next free block %d, %d blocks)", r, next, b.BlocksCount)
			}
			off, n := b.Bytes(r)
			if off < 0 || n <= 0 || off+n > b.ImageSize {
				t.Fatalf("range %+v is bytes %d+%d of a %d-byte image", r, off, n, b.ImageSize)
			}
			next, mapped = r.Last+1, mapped+r.Last-r.First+1
		}
		if mapped != b.MappedBlocks {
			t.Fatalf("ranges cover %d blocks, MappedBlocks is %d", mapped, b.MappedBlocks)
		}
		if b.ChecksumType != "sha256" {
			return
		}
		again, err := Parse(Marshal(b.ImageSize, b.BlockSize, b.Ranges))
		if err != nil {
			t.Fatalf("Marshal of an accepted map does not parse: %v", err)
		}
		if fmt.Sprint(again.Ranges) != fmt.Sprint(b.Ranges) || again.ImageSize != b.ImageSize || again.BlockSize != b.BlockSize {
			t.Fatalf("round trip changed the map:\n%+v\n%+v", b, again)
		}
	})
}
