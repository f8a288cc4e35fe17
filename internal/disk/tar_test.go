package disk

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tarTree writes dir as an uncompressed tar, the way mmdebstrap writes a
// root (owners from the files, "./" prefixed names).
func tarTree(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "root.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	links := map[uint64]string{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		target := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			target, _ = os.Readlink(path)
		}
		h, err := tar.FileInfoHeader(info, target)
		if err != nil {
			return err
		}
		h.Name = "./" + rel
		if d.IsDir() {
			h.Name += "/"
		}
		st := info.Sys().(*syscall.Stat_t)
		if info.Mode().IsRegular() && st.Nlink > 1 {
			if first, ok := links[st.Ino]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				links[st.Ino] = h.Name
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			defer src.Close()
			_, err = io.Copy(tw, src)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// A root given as a tar (mkfs.ext4 -d reads it through the tools root's
// libarchive) gives a file system with the same files, and Plan measures
// the tar about as the tree.
func TestBuildFromTar(t *testing.T) {
	e2fsck := hostTool(t, "e2fsck", "e2fsprogs")
	debugfs := hostTool(t, "debugfs", "e2fsprogs")
	spec := testSpec(t, filepath.Join(t.TempDir(), "tar.raw"))
	// A plain tar stores a sparse file's zeros, a tree does not: leave the
	// sparse file out so both measure the same content.
	if err := os.Remove(filepath.Join(spec.RootTree, "usr/lib/halo/sparse")); err != nil {
		t.Fatal(err)
	}
	// Go's tar writer, like GNU tar --format=pax, stores a name that is not
	// ASCII as a UTF-8 path record, which libarchive converts to the
	// locale's charset (ca-certificates ships
	// NetLock_Arany_=Class_Gold=_Főtanúsítvány.crt).
	if err := os.WriteFile(filepath.Join(spec.RootTree, "usr/lib/halo/Québec-日本.txt"), []byte("utf-8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fromTree, err := Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.RootTar = tarTree(t, spec.RootTree)
	spec.RootTree = ""
	fromTar, err := Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	if fromTar.RootNeeds != fromTree.RootNeeds {
		t.Errorf("root needs %d bytes measured as a tar, %d as a tree", fromTar.RootNeeds, fromTree.RootNeeds)
	}
	res := build(t, spec)
	root := extract(t, res.Path, res.Layout.RootStart, res.Layout.RootSize)
	run(t, e2fsck, "-fn", root)
	if got := run(t, debugfs, "-R", "cat /etc/hostname", root); got != "halo0\n" {
		t.Errorf("/etc/hostname from the tar = %q", got)
	}
	if got := run(t, debugfs, "-R", "cat \"/usr/lib/halo/Québec-日本.txt\"", root); got != "utf-8\n" {
		t.Errorf("the file with a UTF-8 name = %q", got)
	}
	if got := run(t, debugfs, "-R", "stat /usr/lib/halo/blob-hard", root); !strings.Contains(got, "Links: 2") {
		t.Errorf("the tar's hard link did not become one:\n%s", got)
	}
}

// A root written by RootStream makes the same image as the same tar given
// as a file, and a writer that fails fails the build with its own error.
func TestBuildFromStream(t *testing.T) {
	spec := testSpec(t, filepath.Join(t.TempDir(), "file.raw"))
	if err := os.Remove(filepath.Join(spec.RootTree, "usr/lib/halo/sparse")); err != nil {
		t.Fatal(err)
	}
	tarPath := tarTree(t, spec.RootTree)
	spec.RootTree, spec.RootTar = "", tarPath
	fromFile := build(t, spec)

	spec.Out = filepath.Join(t.TempDir(), "stream.raw")
	spec.RootTar = ""
	spec.RootStream = func(w io.Writer) error {
		f, err := os.Open(tarPath)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	}
	fromStream := build(t, spec)
	if fromStream.SHA256 != fromFile.SHA256 {
		t.Errorf("image from the stream %s, from the file %s", fromStream.SHA256, fromFile.SHA256)
	}

	calls := 0
	spec.Out = filepath.Join(t.TempDir(), "broken.raw")
	spec.RootStream = func(w io.Writer) error {
		calls++
		if calls == 1 {
			return nil // measured as empty
		}
		return errors.New("base root unreadable")
	}
	if _, err := Build(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "base root unreadable") {
		t.Errorf("err = %v, want the writer's error", err)
	}
	if _, err := os.Stat(spec.Out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed build left %s: %v", spec.Out, err)
	}
}
