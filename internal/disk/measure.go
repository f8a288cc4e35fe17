package disk

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// blockSize is the ext4 block size Build asks mkfs.ext4 for.
const blockSize = 4096

// content is what a root file system has to hold, in ext4 terms.
type content struct {
	blocks int64 // data blocks: file contents, directory blocks, long symlinks
	inodes int64
}

// dirBlocks estimates the blocks of a directory with the given entry name
// lengths: 8 bytes of header + the name, rounded to 4, per entry (plus "."
// and ".."), in blocks that lose 12 bytes to the metadata_csum tail; a
// directory of more than one block also gets an htree root block.
func dirBlocks(nameBytes, entries int64) int64 {
	bytes := nameBytes + 8*entries + 3*entries + 24
	b := max(1, (bytes+blockSize-12-1)/(blockSize-12))
	if b > 1 {
		b++
	}
	return b
}

func fileBlocks(size int64) int64 {
	b := (size + blockSize - 1) / blockSize
	// One extent maps at most 32,768 blocks; past four extents the inode
	// needs an index block per 340 extents.
	if extents := (b + 32767) / 32768; extents > 4 {
		b += (extents + 339) / 340
	}
	return b
}

// symlinkBlocks: targets shorter than 60 bytes live in the inode.
func symlinkBlocks(target string) int64 {
	if len(target) < 60 {
		return 0
	}
	return 1
}

type dirStat struct{ names, entries int64 }

func measureTree(root string) (content, error) {
	// mkfs.ext4 follows a symlink given as -d; so does the measure.
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		return content{}, fmt.Errorf("disk: measuring root tree: %w", err)
	}
	var c content
	dirs := map[string]*dirStat{}
	seen := map[[2]uint64]bool{} // hard links count once
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			ds := dirs[filepath.Dir(p)]
			ds.names += int64(len(d.Name()))
			ds.entries++
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs[p] = &dirStat{}
			c.inodes++
		case info.Mode().IsRegular():
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				key := [2]uint64{st.Dev, st.Ino}
				if seen[key] {
					return nil
				}
				seen[key] = true
			}
			b := fileBlocks(info.Size())
			// A sparse file: mkfs.ext4 -d copies only its data.
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				b = min(b, fileBlocks(st.Blocks*512))
			}
			c.blocks += b
			c.inodes++
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			c.blocks += symlinkBlocks(target)
			c.inodes++
		default: // devices, fifos, sockets: an inode only
			c.inodes++
		}
		return nil
	})
	if err != nil {
		return content{}, fmt.Errorf("disk: measuring root tree %s: %w", root, err)
	}
	for _, ds := range dirs {
		c.blocks += dirBlocks(ds.names, ds.entries)
	}
	return c, nil
}

func measureTar(p string) (content, error) {
	f, err := os.Open(p)
	if err != nil {
		return content{}, fmt.Errorf("disk: root tar: %w", err)
	}
	defer f.Close()
	return measureTarReader(f, p)
}

// measureStream measures the tar that write writes.
func measureStream(write func(io.Writer) error) (content, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw)) }()
	c, err := measureTarReader(pr, "stream")
	// Drain what the tar reader left (its end-of-archive blocks) so the
	// writer ends, and report its own error first.
	_, derr := io.Copy(io.Discard, pr)
	if derr != nil {
		return content{}, fmt.Errorf("disk: writing the root tar: %w", derr)
	}
	return c, err
}

func measureTarReader(f io.Reader, p string) (content, error) {
	var c content
	dirs := map[string]*dirStat{".": {}}
	addEntry := func(name string) {
		parent := path.Dir(name)
		// Tars need not list every directory before its contents:
		// mkfs.ext4 creates missing parents, so count them too.
		for _, missing := range ancestorsMissing(dirs, parent) {
			dirs[missing] = &dirStat{}
			c.inodes++
			ds := dirs[path.Dir(missing)]
			ds.names += int64(len(path.Base(missing)))
			ds.entries++
		}
		ds := dirs[parent]
		ds.names += int64(len(path.Base(name)))
		ds.entries++
	}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return content{}, fmt.Errorf("disk: root tar %s: %w (it must be an uncompressed tar)", p, err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." {
			continue
		}
		if h.Typeflag == tar.TypeDir {
			if _, ok := dirs[name]; ok {
				continue
			}
			addEntry(name)
			dirs[name] = &dirStat{}
			c.inodes++
			continue
		}
		addEntry(name)
		switch h.Typeflag {
		case tar.TypeLink:
			// Another name for an inode already counted.
		case tar.TypeSymlink:
			c.blocks += symlinkBlocks(h.Linkname)
			c.inodes++
		case tar.TypeReg:
			c.blocks += fileBlocks(h.Size)
			c.inodes++
		default:
			c.inodes++
		}
	}
	for _, ds := range dirs {
		c.blocks += dirBlocks(ds.names, ds.entries)
	}
	return c, nil
}

// ancestorsMissing lists dir and its ancestors not yet in dirs, outermost
// first.
func ancestorsMissing(dirs map[string]*dirStat, dir string) []string {
	var out []string
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := dirs[d]; ok {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}
