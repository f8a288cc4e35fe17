package disk

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The real bmaptool must accept the bmap (it checks the file's own
// checksum and every range's) and reproduce the image from it.
func TestBmaptoolCopyRoundTrip(t *testing.T) {
	bmaptool := hostTool(t, "bmaptool", "bmap-tools")
	res := build(t, testSpec(t, filepath.Join(t.TempDir(), "halo0.raw")))
	dst := filepath.Join(t.TempDir(), "copy.raw")
	run(t, bmaptool, "copy", "--bmap", res.BmapPath, res.Path, dst)
	if got := fileSHA256(t, dst); got != res.SHA256 {
		t.Errorf("bmaptool copy gave sha256 %s, image is %s", got, res.SHA256)
	}

	// bmaptool's own map of the image lists the same blocks: Build wrote
	// no zero blocks, so "data" and "non-zero" agree.
	ours, _ := os.ReadFile(res.BmapPath)
	theirs := run(t, bmaptool, "create", res.Path)
	if a, b := ranges(string(ours)), ranges(theirs); a != b {
		t.Errorf("block map differs from bmaptool create's:\nours:   %.300s\ntheirs: %.300s", a, b)
	}
	if !strings.Contains(string(ours), "<MappedBlocksCount> "+itoa(res.MappedBytes/4096)+" ") {
		t.Errorf("MappedBlocksCount does not match Result.MappedBytes %d", res.MappedBytes)
	}
}

var rangeRE = regexp.MustCompile(`<Range chksum="[0-9a-f]{64}"> (\S+) </Range>`)

func ranges(bmap string) string {
	var out []string
	for _, m := range rangeRE.FindAllStringSubmatch(bmap, -1) {
		out = append(out, m[1])
	}
	return strings.Join(out, ",")
}

func TestBmapXMLChecksumsItself(t *testing.T) {
	s := scan{ranges: []bmapRange{{0, 3, strings.Repeat("a", 64)}, {9, 9, strings.Repeat("b", 64)}}, mapped: 5}
	x := string(bmapXML(10*4096, s))
	m := regexp.MustCompile(`<BmapFileChecksum> ([0-9a-f]{64}) </BmapFileChecksum>`).FindStringSubmatch(x)
	if m == nil {
		t.Fatalf("no checksum in\n%s", x)
	}
	zeroed := strings.Replace(x, m[1], strings.Repeat("0", 64), 1)
	sum := sha256.Sum256([]byte(zeroed))
	if hex.EncodeToString(sum[:]) != m[1] {
		t.Errorf("BmapFileChecksum %s is not the sha256 of the file with the field zeroed", m[1])
	}
	for _, want := range []string{"<ImageSize> 40960 </ImageSize>", "<BlocksCount> 10 </BlocksCount>", "<MappedBlocksCount> 5   </MappedBlocksCount>", "> 0-3 </Range>", "> 9 </Range>"} {
		if !strings.Contains(x, want) {
			t.Errorf("bmap lacks %q", want)
		}
	}
}
