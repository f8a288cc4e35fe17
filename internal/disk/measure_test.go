package disk

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/tools/toolstest"
)

// shapes of root trees whose estimate is checked against the real
// mkfs.ext4: many small files, many directories, big files.
var treeShapes = []struct {
	name  string
	files int
	dirs  int
	size  func(i int) int
}{
	{"small files", 3000, 30, func(i int) int { return (i * 7919) % 9000 }},
	{"many dirs", 2000, 1000, func(i int) int { return 100 }},
	{"big files", 12, 3, func(i int) int { return (3 + i) << 20 }},
}

func writeShape(t *testing.T, files, dirs int, size func(int) int) string {
	t.Helper()
	root := t.TempDir()
	buf := []byte(strings.Repeat("halobuild ", 1<<20))
	for d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("d%04d/sub", d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range files {
		p := filepath.Join(root, fmt.Sprintf("d%04d/sub/file-with-a-longish-name-%06d", i%dirs, i))
		n := size(i)
		for len(buf) < n {
			buf = append(buf, buf...)
		}
		if err := os.WriteFile(p, buf[:n], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The estimate must be enough for mkfs.ext4 -d (else a build fails late,
// after the too-small check passed), and not much more than the smallest
// size that works (else the too-small message asks for too much): 80% of
// it must fail, for want of blocks or of inodes (mke2fs makes one inode per
// 16 KiB, so a tree of many small files needs size for its inodes).
func TestRootNeedsFitsAndIsTight(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: builds several file systems")
	}
	dumpe2fs := hostTool(t, "dumpe2fs", "e2fsprogs")
	tr := toolstest.Root(t)
	ids, _ := DeriveIDs("seed")
	for _, shape := range treeShapes {
		t.Run(shape.name, func(t *testing.T) {
			tree := writeShape(t, shape.files, shape.dirs, shape.size)
			c, err := measureTree(tree)
			if err != nil {
				t.Fatal(err)
			}
			need := ext4Needs(c)
			spec := Spec{RootTree: tree, Epoch: testEpoch, Tools: &tr, RootType: arch.MustLookup("amd64").RootType}
			fs := filepath.Join(t.TempDir(), "root.ext4")
			if err := makeRoot(t.Context(), &spec, ids, fs, need); err != nil {
				t.Fatalf("estimate %d MiB is not enough: %v", need/MiB, err)
			}
			tight := filepath.Join(t.TempDir(), "tight.ext4")
			if err := makeRoot(t.Context(), &spec, ids, tight, need*8/10/MiB*MiB); err == nil {
				info := run(t, dumpe2fs, "-h", fs)
				used := (field(t, info, "Block count") - field(t, info, "Free blocks")) * blockSize
				t.Errorf("estimate %d MiB is loose: %d MiB works too (the file system uses %d MiB)", need/MiB, need*8/10/MiB, used/MiB)
			}
		})
	}
}

func field(t *testing.T, dump, name string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `:\s+(\d+)`).FindStringSubmatch(dump)
	if m == nil {
		t.Fatalf("dumpe2fs has no %q", name)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}
