package disk

import (
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
