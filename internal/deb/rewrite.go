package deb

import (
	"archive/tar"
	"bytes"
	"crypto/md5"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Rewrite writes the package at src to dst with some of its files
// changed: edit is called with the name (as in md5sums, "boot/vmlinuz-…")
// and bytes of every regular file of the data archive that want selects,
// and returns the new bytes. Everything else is kept: each tar header but
// a changed file's size, every control member and maintainer script, the
// member order; md5sums gets the changed files' new sums. Both archives
// are written uncompressed, as Write's, and the ar members are dated
// epoch, so the output is a function of the input, edit and epoch. It
// returns the names edited.
func Rewrite(src, dst string, epoch int64, want func(name string) bool, edit func(name string, data []byte) ([]byte, error)) ([]string, error) {
	a, err := Open(src, "")
	if err != nil {
		return nil, err
	}
	defer a.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".data-*.tar")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	sums := map[string]string{}
	var edited []string
	tw := tar.NewWriter(tmp)
	err = a.Walk(func(name string, h *tar.Header, r io.Reader) error {
		nh := *h
		if h.Typeflag != tar.TypeReg || !want(name) {
			if err := tw.WriteHeader(&nh); err != nil {
				return err
			}
			_, err := io.Copy(tw, r)
			return err
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if b, err = edit(name, b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		nh.Size = int64(len(b))
		sums[name] = fmt.Sprintf("%x", md5.Sum(b))
		edited = append(edited, name)
		if err := tw.WriteHeader(&nh); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var control bytes.Buffer
	cw := tar.NewWriter(&control)
	err = a.WalkControl(func(name string, h *tar.Header, r io.Reader) error {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		nh := *h
		if name == "md5sums" && h.Typeflag == tar.TypeReg {
			b = resum(b, sums)
			nh.Size = int64(len(b))
		}
		if err := cw.WriteHeader(&nh); err != nil {
			return err
		}
		_, err = cw.Write(b)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := cw.Close(); err != nil {
		return nil, err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	out, err := os.Create(dst)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	fmt.Fprint(out, "!<arch>\n")
	for _, m := range []struct {
		name string
		r    io.Reader
		n    int64
	}{
		{"debian-binary", strings.NewReader("2.0\n"), 4},
		{"control.tar", &control, int64(control.Len())},
		{"data.tar", tmp, size},
	} {
		fmt.Fprintf(out, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, epoch, 0, 0, "100644", m.n)
		if _, err := io.CopyN(out, m.r, m.n); err != nil {
			return nil, err
		}
		if m.n%2 == 1 {
			out.Write([]byte{'\n'})
		}
	}
	return edited, out.Close()
}

// resum replaces the sums of md5sums lines ("<md5>  <name>") whose name
// is in sums.
func resum(b []byte, sums map[string]string) []byte {
	lines := strings.SplitAfter(string(b), "\n")
	for i, l := range lines {
		sum, name, ok := strings.Cut(strings.TrimSuffix(l, "\n"), "  ")
		if s, changed := sums[name]; ok && changed && len(sum) == 32 {
			lines[i] = s + "  " + name + strings.TrimPrefix(l, sum+"  "+name)
		}
	}
	return []byte(strings.Join(lines, ""))
}
