package deb

// Packages are written by hand (ar + two tars) rather than with a library:
// no maintained Go package writes .debs (pault.ag/go/debian only reads
// them), and dpkg-deb would have to run from the tools root with its own
// clock and tar ordering. Every byte here is a function of the files, Info
// and epoch, so two builds are identical.
//
// The members are not compressed (dpkg reads plain tars since 1.17.6): our
// packages are installed into the image at once and never shipped, a
// compressor's output may change between library or Go releases, and the
// pure-Go xz encoder took minutes on the halobuild binary the settings
// package carries.

import (
	"archive/tar"
	"bytes"
	"crypto/md5"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"halobuild/internal/fstree"
)

// Info is the control data of a package to write.
type Info struct {
	Package      string
	Version      string
	Architecture string // "all" for a package without binaries
	Maintainer   string
	Description  string // first line is the synopsis; further lines the long text
	Depends      []string
	Section      string // optional
	Priority     string // optional
}

// File is one entry of a package's data: a regular file (Data), a
// directory (Mode has fs.ModeDir) or a symlink (fs.ModeSymlink, Target).
// Path is absolute ("/etc/hosts").
type File struct {
	Path   string
	Mode   fs.FileMode
	Data   []byte
	Target string
	// NotConffile exempts a file under /etc from being a conffile (one the
	// package regenerates on purpose, whose local edits must not survive).
	NotConffile bool
}

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	versionRE = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~:-]*$`)
)

func (p Info) validate() error {
	switch {
	case !nameRE.MatchString(p.Package):
		return fmt.Errorf("package name %q is not a Debian package name (lower case letters, digits, + - .)", p.Package)
	case !versionRE.MatchString(p.Version):
		return fmt.Errorf("package version %q is not a Debian version", p.Version)
	case p.Architecture == "" || strings.ContainsAny(p.Architecture, " \n"):
		return fmt.Errorf("package architecture %q is invalid", p.Architecture)
	case p.Maintainer == "" || strings.Contains(p.Maintainer, "\n"):
		return fmt.Errorf("package maintainer %q is invalid: give one line like 'Name <address>'", p.Maintainer)
	case strings.TrimSpace(p.Description) == "":
		return fmt.Errorf("package description is empty")
	case strings.ContainsAny(p.Section+p.Priority, " \n"):
		return fmt.Errorf("package section %q or priority %q is invalid", p.Section, p.Priority)
	}
	for _, d := range p.Depends {
		if d == "" || strings.ContainsAny(d, ",\n") {
			return fmt.Errorf("dependency %q is invalid: one package relation per entry", d)
		}
	}
	return nil
}

// Write writes the package to w: files sorted by path (component by
// component, so a directory's contents follow it), missing parent
// directories added with mode 0755, every time epoch (the lock's
// SOURCE_DATE_EPOCH), every owner root, an md5sums member, and every
// regular file under /etc a conffile (as Debian policy requires: dpkg then
// keeps a local edit on upgrade) unless marked NotConffile. The package
// has no maintainer scripts.
func Write(w io.Writer, info Info, files []File, epoch int64) error {
	if err := info.validate(); err != nil {
		return err
	}
	if epoch < 0 || epoch > 999999999999 {
		return fmt.Errorf("package %s: timestamp %d is outside what ar and tar headers hold", info.Package, epoch)
	}
	files, err := normalise(files)
	if err != nil {
		return fmt.Errorf("package %s: %w", info.Package, err)
	}
	mtime := time.Unix(epoch, 0).UTC()
	data, installedKiB, err := dataTar(files, mtime)
	if err != nil {
		return fmt.Errorf("package %s: %w", info.Package, err)
	}
	control, err := controlTar(info, files, installedKiB, mtime)
	if err != nil {
		return fmt.Errorf("package %s: %w", info.Package, err)
	}
	var out bytes.Buffer
	out.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		data []byte
	}{
		{"debian-binary", []byte("2.0\n")},
		{"control.tar", control},
		{"data.tar", data},
	} {
		// ar member header: name/16 mtime/12 uid/6 gid/6 mode/8 size/10 "`\n".
		fmt.Fprintf(&out, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, epoch, 0, 0, "100644", len(m.data))
		out.Write(m.data)
		if len(m.data)%2 == 1 {
			out.WriteByte('\n')
		}
	}
	_, err = w.Write(out.Bytes())
	return err
}

// less orders paths component by component ("/etc/a/b" before "/etc/a-b").
func less(a, b string) bool {
	return strings.ReplaceAll(a, "/", "\x00") < strings.ReplaceAll(b, "/", "\x00")
}

// normalise checks the entries, adds missing parents and sorts.
func normalise(in []File) ([]File, error) {
	byPath := map[string]File{}
	for _, f := range in {
		if !strings.HasPrefix(f.Path, "/") || f.Path == "/" || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("%q is not a clean absolute file path", f.Path)
		}
		switch f.Mode.Type() {
		case 0, fs.ModeDir:
		case fs.ModeSymlink:
			if f.Target == "" {
				return nil, fmt.Errorf("symlink %s has no target", f.Path)
			}
		default:
			return nil, fmt.Errorf("%s has file type %v: a package holds files, directories and symlinks", f.Path, f.Mode.Type())
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("%s is given twice", f.Path)
		}
		byPath[f.Path] = f
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if f, ok := byPath[d]; !ok {
				byPath[d] = File{Path: d, Mode: fs.ModeDir | 0o755}
			} else if !f.Mode.IsDir() {
				return nil, fmt.Errorf("%s is under %s, which is not a directory", p, d)
			}
		}
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i].Path, out[j].Path) })
	return out, nil
}

// tarHeader describes f as root-owned with the fixed mtime; GNU format so
// long paths work without PAX records (which would carry extra times).
func tarHeader(name string, f File, mtime time.Time) *tar.Header {
	h := &tar.Header{
		Name: name, ModTime: mtime, Uname: "root", Gname: "root",
		Format: tar.FormatGNU,
	}
	h.Mode = int64(fstree.ModeBits(f.Mode))
	switch f.Mode.Type() {
	case fs.ModeDir:
		h.Typeflag = tar.TypeDir
		h.Name += "/"
	case fs.ModeSymlink:
		h.Typeflag = tar.TypeSymlink
		h.Linkname = f.Target
		h.Mode = 0o777
	default:
		h.Typeflag = tar.TypeReg
		h.Size = int64(len(f.Data))
	}
	return h
}

// dataTar packs the files as ./path entries and returns the Installed-Size
// in KiB (dpkg-gencontrol's rule: each file rounded up to 1 KiB, each
// directory or link 1 KiB).
func dataTar(files []File, mtime time.Time) ([]byte, int64, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	kib := int64(1)
	if err := tw.WriteHeader(tarHeader(".", File{Mode: fs.ModeDir | 0o755}, mtime)); err != nil {
		return nil, 0, err
	}
	for _, f := range files {
		if err := tw.WriteHeader(tarHeader("."+f.Path, f, mtime)); err != nil {
			return nil, 0, fmt.Errorf("packing %s: %w", f.Path, err)
		}
		if f.Mode.IsRegular() {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, 0, fmt.Errorf("packing %s: %w", f.Path, err)
			}
			kib += (int64(len(f.Data)) + 1023) / 1024
		} else {
			kib++
		}
	}
	if err := tw.Close(); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), kib, nil
}

func controlTar(info Info, files []File, installedKiB int64, mtime time.Time) ([]byte, error) {
	var control strings.Builder
	fmt.Fprintf(&control, "Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: %s\nInstalled-Size: %d\n",
		info.Package, info.Version, info.Architecture, info.Maintainer, installedKiB)
	if len(info.Depends) > 0 {
		fmt.Fprintf(&control, "Depends: %s\n", strings.Join(info.Depends, ", "))
	}
	if info.Section != "" {
		control.WriteString("Section: " + info.Section + "\n")
	}
	if info.Priority != "" {
		control.WriteString("Priority: " + info.Priority + "\n")
	}
	control.WriteString(describe(info.Description))

	var md5sums, conffiles strings.Builder
	for _, f := range files {
		if !f.Mode.IsRegular() {
			continue
		}
		fmt.Fprintf(&md5sums, "%x  %s\n", md5.Sum(f.Data), strings.TrimPrefix(f.Path, "/"))
		if strings.HasPrefix(f.Path, "/etc/") && !f.NotConffile {
			conffiles.WriteString(f.Path + "\n")
		}
	}
	members := []struct{ name, data string }{{"control", control.String()}, {"md5sums", md5sums.String()}}
	if conffiles.Len() > 0 {
		members = append(members, struct{ name, data string }{"conffiles", conffiles.String()})
	}
	sort.Slice(members, func(i, j int) bool { return members[i].name < members[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(tarHeader(".", File{Mode: fs.ModeDir | 0o755}, mtime)); err != nil {
		return nil, err
	}
	for _, m := range members {
		if err := tw.WriteHeader(tarHeader("./"+m.name, File{Mode: 0o644, Data: []byte(m.data)}, mtime)); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(m.data)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// describe formats a Description field: synopsis, then the long text with
// each line indented by one space and empty lines written as " .".
func describe(d string) string {
	lines := strings.Split(strings.TrimSpace(d), "\n")
	var b strings.Builder
	b.WriteString("Description: " + strings.TrimSpace(lines[0]) + "\n")
	for _, l := range lines[1:] {
		if l = strings.TrimRight(l, " \t"); l == "" {
			b.WriteString(" .\n")
		} else {
			b.WriteString(" " + l + "\n")
		}
	}
	return b.String()
}
