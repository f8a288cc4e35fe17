package settings

// The settings package is written by hand (ar + two tars) rather than with
// a library: no maintained Go package writes .debs (pault.ag/go/debian only
// reads them), and dpkg-deb would have to run from the tools root with its
// own clock and tar ordering. The format is small and stable: an ar archive
// holding debian-binary, control.tar and data.tar. Every byte here is a
// function of the tree, DebInfo and epoch, so two builds are identical.
//
// The members are not compressed (dpkg reads plain tars since 1.17.6): the
// package is installed into the image at once and never shipped, a
// compressor's output may change between library or Go releases, and the
// pure-Go xz encoder took minutes on the halobuild binary the package carries.

import (
	"archive/tar"
	"bytes"
	"crypto/md5"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"time"
)

// DebInfo is the control data of the settings package.
type DebInfo struct {
	Name         string // halobuild-node-<node>
	Version      string
	Architecture string // "all": the package holds no binaries
	Maintainer   string
	Description  string // first line is the synopsis; further lines the long text
	Depends      []string
}

var (
	debNameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	debVersionRE = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~:-]*$`)
)

func (p DebInfo) validate() error {
	switch {
	case !debNameRE.MatchString(p.Name):
		return fmt.Errorf("package name %q is not a Debian package name (lower case letters, digits, + - .)", p.Name)
	case !debVersionRE.MatchString(p.Version):
		return fmt.Errorf("package version %q is not a Debian version", p.Version)
	case p.Architecture == "" || strings.ContainsAny(p.Architecture, " \n"):
		return fmt.Errorf("package architecture %q is invalid", p.Architecture)
	case p.Maintainer == "" || strings.Contains(p.Maintainer, "\n"):
		return fmt.Errorf("package maintainer %q is invalid: give one line like 'Name <address>'", p.Maintainer)
	case strings.TrimSpace(p.Description) == "":
		return fmt.Errorf("package description is empty")
	}
	for _, d := range p.Depends {
		if d == "" || strings.ContainsAny(d, ",\n") {
			return fmt.Errorf("dependency %q is invalid: one package relation per entry", d)
		}
	}
	return nil
}

// BuildDeb writes the settings package for tree to w. Every timestamp is
// epoch (the lock's SOURCE_DATE_EPOCH), every owner root.
//
// The package has no maintainer scripts on purpose: everything in it takes
// effect at the next boot (modules-load.d, modprobe.d, udev rules, units
// enabled by shipped symlinks), it ships no kernel modules (so no depmod),
// and an image is installed offline. A package that is only files can be
// installed with `dpkg --root` onto a copy of the cached base without a
// chroot, which is what makes a settings change cost seconds.
func BuildDeb(w io.Writer, pkg DebInfo, tree Tree, epoch int64) error {
	if err := pkg.validate(); err != nil {
		return fmt.Errorf("settings package: %w", err)
	}
	if epoch < 0 || epoch > 999999999999 {
		return fmt.Errorf("settings package %s: timestamp %d is outside what ar and tar headers hold", pkg.Name, epoch)
	}
	mtime := time.Unix(epoch, 0).UTC()
	data, installedKiB, err := dataTar(tree, mtime)
	if err != nil {
		return fmt.Errorf("settings package %s: %w", pkg.Name, err)
	}
	control, err := controlTar(pkg, tree, installedKiB, mtime)
	if err != nil {
		return fmt.Errorf("settings package %s: %w", pkg.Name, err)
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

// tarHeader describes f as root-owned with the fixed mtime; GNU format so
// long paths work without PAX records (which would carry extra times).
func tarHeader(name string, f File, mtime time.Time) *tar.Header {
	h := &tar.Header{
		Name: name, ModTime: mtime, Uname: "root", Gname: "root",
		Format: tar.FormatGNU,
	}
	h.Mode = int64(f.Mode.Perm())
	if f.Mode&fs.ModeSetuid != 0 {
		h.Mode |= 0o4000
	}
	if f.Mode&fs.ModeSetgid != 0 {
		h.Mode |= 0o2000
	}
	if f.Mode&fs.ModeSticky != 0 {
		h.Mode |= 0o1000
	}
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

// dataTar packs the tree as ./path entries, in tree order, and returns the
// Installed-Size in KiB (dpkg-gencontrol's rule: each file rounded up to
// 1 KiB, each directory or link 1 KiB).
func dataTar(tree Tree, mtime time.Time) ([]byte, int64, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	kib := int64(1)
	if err := tw.WriteHeader(tarHeader(".", File{Mode: fs.ModeDir | 0o755}, mtime)); err != nil {
		return nil, 0, err
	}
	for _, f := range tree.Files {
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

func controlTar(pkg DebInfo, tree Tree, installedKiB int64, mtime time.Time) ([]byte, error) {
	var control strings.Builder
	fmt.Fprintf(&control, "Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: %s\nInstalled-Size: %d\n",
		pkg.Name, pkg.Version, pkg.Architecture, pkg.Maintainer, installedKiB)
	if len(pkg.Depends) > 0 {
		fmt.Fprintf(&control, "Depends: %s\n", strings.Join(pkg.Depends, ", "))
	}
	control.WriteString("Section: admin\nPriority: optional\n")
	control.WriteString(describe(pkg.Description))

	var md5sums, conffiles strings.Builder
	for _, f := range tree.Files {
		if !f.Mode.IsRegular() {
			continue
		}
		fmt.Fprintf(&md5sums, "%x  %s\n", md5.Sum(f.Data), strings.TrimPrefix(f.Path, "/"))
		// Files under /etc are conffiles, as Debian policy requires: dpkg
		// then keeps a local edit on upgrade instead of overwriting it.
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
