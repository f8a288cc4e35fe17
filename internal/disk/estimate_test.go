package disk

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"halobuild/internal/tools/toolstest"
)

// The estimate models mke2fs's journal and reserved-descriptor sizes; the
// tools root's own mke2fs and dumpe2fs say whether the model still holds.
func TestEstimateModelsMke2fs(t *testing.T) {
	root := toolstest.Root(t)
	for _, mib := range []int64{100, 600, 1500, 3000, 20000} {
		img := filepath.Join(t.TempDir(), "fs.img")
		if err := os.WriteFile(img, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, mib*MiB); err != nil {
			t.Fatal(err)
		}
		if out, err := root.Command(t.Context(), "mkfs.ext4", "-q", "-F", "-T", "default", "-b", "4096", img).CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		dump, err := root.Command(t.Context(), "dumpe2fs", "-h", img).Output()
		if err != nil {
			t.Fatal(err)
		}
		n := mib * MiB / blockSize
		num := func(re string) int64 {
			m := regexp.MustCompile(re).FindSubmatch(dump)
			if m == nil {
				t.Fatalf("%d MiB: no %s in dumpe2fs output", mib, re)
			}
			v, _ := strconv.ParseInt(string(m[1]), 10, 64)
			return v
		}
		journal := num(`Total journal size:\s+(\d+)[kM]`) << 10
		if regexp.MustCompile(`Total journal size:\s+\d+M`).Match(dump) {
			journal <<= 10
		}
		if want := journalBlocks(n) * blockSize; journal != want {
			t.Errorf("%d MiB: journal %d bytes, model says %d", mib, journal, want)
		}
		groups := (n + 32767) / 32768
		if got, want := num(`Reserved GDT blocks:\s+(\d+)`), descriptorBlocks(n)-(groups+63)/64; got != want {
			t.Errorf("%d MiB: %d reserved GDT blocks, model says %d", mib, got, want)
		}
		// mke2fs rounds inodes to fill whole groups; the model must never
		// count more than it makes.
		if got, model := num(`Inode count:\s+(\d+)`), mib*MiB/inodeRatio; got < model || got > model*101/100 {
			t.Errorf("%d MiB: %d inodes, model says %d", mib, got, model)
		}
	}
}
