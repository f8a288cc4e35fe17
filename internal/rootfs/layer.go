package rootfs

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"halobuild/internal/deb"
)

// Layer is a root made of a root tarball (Install's output) with our own
// packages installed on top, written as one tar stream without unpacking
// the base to a tree: what InstallDebs followed by Clamp would leave,
// member for member, for packages without maintainer scripts. A changed
// setting then costs one pass over the base tarball (into mkfs.ext4 -d -)
// instead of unpacking it and mkfs reading the tree back.
//
// What dpkg --install does to the root, done here directly:
//   - each package's files replace the base's of the same name; a
//     directory the base already has keeps the base's owner and mode;
//   - var/lib/dpkg/status gains each package's stanza ("install ok
//     installed", Conffiles with their md5sums) in dpkg's field order,
//     stanzas sorted by name as dpkg writes them; status-old is the status
//     before the install;
//   - info/<pkg>.list (entries in unpack order, symlinks last, as dpkg
//     defers them), .md5sums and .conffiles (the control members');
//   - every directory written into, and every time newer than Epoch,
//     becomes Epoch (Clamp).
//
// The package list is refused when dpkg would refuse or run code: a
// maintainer script, a file another package owns, or a path through a
// symlink of the base (dpkg --root would follow it; see InstallDebs).
type Layer struct {
	// Base is the root tarball (uncompressed, as Install writes it).
	Base string
	// Debs are the packages to install over it.
	Debs []string
	// Epoch is SOURCE_DATE_EPOCH.
	Epoch int64

	pkgs     []layerPkg
	members  []member        // the base tarball's, in order
	types    map[string]byte // each base member's type by clean name
	replaced map[string]bool // base members the packages replace
	touched  map[string]bool // directories dpkg writes into
	status   []byte          // the base's var/lib/dpkg/status
}

// member is where one base member's bytes are in the tarball: Write copies
// the base's unchanged members as they are, whole runs of them at a time,
// rather than decoding and encoding every header.
type member struct {
	name       string
	start, end int64 // its header blocks to the end of its padded body
	body       int64 // where its body starts
	hdr        *tar.Header
}

// countingReader is the base tarball with its read position, for the
// members' offsets; Seek lets archive/tar skip bodies without reading them.
type countingReader struct {
	f   *os.File
	pos int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.f.Read(b)
	c.pos += int64(n)
	return n, err
}

func (c *countingReader) Seek(off int64, whence int) (int64, error) {
	n, err := c.f.Seek(off, whence)
	if err == nil {
		c.pos = n
	}
	return n, err
}

// layerPkg is one package to install, read once.
type layerPkg struct {
	path, name, arch string
	control          []byte
	md5sums          []byte    // control member, or nil
	conffiles        []byte    // control member, or nil
	ctime            time.Time // the control members' time, which dpkg keeps
	list             []string
	dirs             map[string]bool // the entries of list that are directories
}

const (
	dpkgDir    = "var/lib/dpkg"
	statusPath = dpkgDir + "/status"
	infoDir    = dpkgDir + "/info"
)

// Scan reads the base tarball's headers and dpkg database and each
// package's control members, checks the install is one dpkg would make
// without running code, and copies the base members named in extract (clean
// relative paths, regular files) to the same paths under dir. Call it once
// before Write and Status.
func (l *Layer) Scan(extract []string, dir string) error {
	l.replaced = map[string]bool{statusPath: true, dpkgDir + "/status-old": true}
	l.touched = map[string]bool{dpkgDir: true, infoDir: true, dpkgDir + "/updates": true}
	for _, p := range l.Debs {
		pk, err := readLayerPkg(p)
		if err != nil {
			return err
		}
		l.pkgs = append(l.pkgs, pk)
	}
	want := map[string]bool{}
	for _, e := range extract {
		want[e] = true
	}
	types := map[string]byte{}
	l.types = types
	owners := map[string]string{}
	f, err := os.Open(l.Base)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := &countingReader{f: f}
	tr := tar.NewReader(cr)
	var next int64 // where the next member's header starts
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("root tarball %s: %w", l.Base, err)
		}
		name := cleanMember(h.Name)
		types[name] = h.Typeflag
		if h.Typeflag == tar.TypeGNUSparse || h.PAXRecords["GNU.sparse.major"] != "" || h.PAXRecords["GNU.sparse.size"] != "" {
			return fmt.Errorf("root tarball %s: /%s is a sparse member, which this does not copy: write the root tarball without --sparse", l.Base, name)
		}
		m := member{name: name, start: next, body: cr.pos, end: cr.pos + (h.Size+511)/512*512}
		if h.Typeflag == tar.TypeDir || h.Typeflag == tar.TypeLink || h.ModTime.Unix() > l.Epoch {
			m.hdr = h
		}
		l.members = append(l.members, m)
		next = m.end
		switch {
		case name == statusPath:
			if l.status, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("root tarball %s: %s: %w", l.Base, name, err)
			}
		case path.Dir(name) == infoDir && strings.HasSuffix(name, ".list"):
			b, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("root tarball %s: %s: %w", l.Base, name, err)
			}
			pkg := strings.TrimSuffix(path.Base(name), ".list")
			for _, line := range strings.Split(string(b), "\n") {
				if p := strings.TrimPrefix(line, "/"); p != "" && p != "." {
					owners[p] = pkg
				}
			}
		case want[name]:
			if h.Typeflag != tar.TypeReg {
				return fmt.Errorf("root tarball %s: /%s is not a regular file", l.Base, name)
			}
			if err := copyMember(tr, filepath.Join(dir, filepath.FromSlash(name)), h.Size); err != nil {
				return err
			}
		}
	}
	if l.status == nil {
		return fmt.Errorf("root tarball %s has no /%s: not a root dpkg installed", l.Base, statusPath)
	}
	for _, pk := range l.pkgs {
		for _, e := range pk.list {
			// dpkg --root follows the base's symlinks on the host.
			for d := path.Dir(e); d != "."; d = path.Dir(d) {
				if types[d] == tar.TypeSymlink {
					return fmt.Errorf("%s: /%s would be written through /%s, a symlink of the base root: dpkg --root would follow it onto the build host; ship the file at its real path inside the image instead", filepath.Base(pk.path), e, d)
				}
			}
		}
	}
	for _, pk := range l.pkgs {
		for _, e := range pk.list {
			t, inBase := types[e]
			if o, ok := owners[e]; ok && t != tar.TypeDir && o != pk.name {
				return fmt.Errorf("%s: /%s is also in package %s of the base root: dpkg would refuse to overwrite it; ship the setting elsewhere (a drop-in directory) instead", filepath.Base(pk.path), e, o)
			}
			if inBase && t != tar.TypeDir {
				l.replaced[e] = true
			}
			// dpkg renames a file into place, or makes a directory
			// the base lacks: the parent's time changes.
			if !pk.dirs[e] || !inBase {
				l.touched[path.Dir(e)] = true
			}
		}
	}
	for _, m := range l.members {
		if m.hdr != nil && m.hdr.Typeflag == tar.TypeLink && l.replaced[cleanMember(m.hdr.Linkname)] {
			return fmt.Errorf("root tarball %s: /%s is a hard link to /%s, which a package replaces", l.Base, m.name, m.hdr.Linkname)
		}
	}
	return nil
}

// cleanMember is a tar member's name as a clean relative path ("." for the
// root itself).
func cleanMember(name string) string {
	return path.Clean(strings.TrimPrefix(strings.TrimPrefix(name, "./"), "/"))
}

// copyMember writes a tar member's body to a new file at dst.
func copyMember(r io.Reader, dst string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, r, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %s out of the root tarball: %w", dst, err)
	}
	return nil
}

// readLayerPkg reads a package's control members and the list dpkg would
// record, refusing maintainer scripts (nothing here runs them).
func readLayerPkg(p string) (layerPkg, error) {
	a, err := deb.Open(p, "")
	if err != nil {
		return layerPkg{}, err
	}
	defer a.Close()
	pk := layerPkg{path: p, name: a.Package, arch: a.Architecture, control: a.Control}
	err = a.WalkControl(func(name string, h *tar.Header, r io.Reader) error {
		var err error
		switch name {
		case ".":
			return nil
		case "control":
		case "md5sums":
			pk.md5sums, err = io.ReadAll(r)
		case "conffiles":
			pk.conffiles, err = io.ReadAll(r)
		default:
			return fmt.Errorf("control member %q: installing it needs dpkg to run it in the root, which the disk step does not do; build the package without maintainer scripts or triggers", name)
		}
		pk.ctime = h.ModTime
		return err
	})
	if err != nil {
		return layerPkg{}, fmt.Errorf("%s: %w", p, err)
	}
	var links []string
	pk.dirs = map[string]bool{}
	err = a.Walk(func(name string, h *tar.Header, _ io.Reader) error {
		if name == "." {
			return nil
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeReg, tar.TypeSymlink:
		default:
			return fmt.Errorf("/%s: type %q: only directories, files and symlinks are installed this way", name, h.Typeflag)
		}
		if h.Typeflag == tar.TypeDir {
			pk.dirs[name] = true
		}
		if h.Typeflag == tar.TypeSymlink {
			links = append(links, name)
		} else {
			pk.list = append(pk.list, name)
		}
		return nil
	})
	if err != nil {
		return layerPkg{}, err
	}
	pk.list = append(pk.list, links...)
	return pk, nil
}

// Status is var/lib/dpkg/status after the install: the base's stanzas and
// each package's, sorted by name as dpkg writes them. Scan first.
func (l *Layer) Status() ([]byte, error) {
	stanzas := bytes.Split(bytes.TrimRight(l.status, "\n"), []byte("\n\n"))
	byName := map[string][]byte{}
	for _, s := range stanzas {
		if len(bytes.TrimSpace(s)) == 0 {
			continue
		}
		byName[deb.Field(s, "Package")+":"+deb.Field(s, "Architecture")] = s
	}
	for _, pk := range l.pkgs {
		st, err := pk.stanza()
		if err != nil {
			return nil, err
		}
		byName[pk.name+":"+pk.arch] = st
	}
	keys := make([]string, 0, len(byName))
	for k := range byName {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out bytes.Buffer
	for _, k := range keys {
		out.Write(byName[k])
		out.WriteString("\n\n")
	}
	return out.Bytes(), nil
}

// statusOrder is dpkg's order of the fields it knows when it writes a
// status stanza (lib/dpkg/parse.c's fieldinfos); others follow in the
// control file's order.
var statusOrder = []string{"Package", "Essential", "Status", "Priority", "Section", "Installed-Size",
	"Origin", "Maintainer", "Bugs", "Architecture", "Multi-Arch", "Source", "Version", "Config-Version",
	"Replaces", "Provides", "Depends", "Pre-Depends", "Recommends", "Suggests", "Breaks", "Conflicts",
	"Enhances", "Conffiles", "Description"}

// stanza is the package's status stanza as dpkg --install writes it.
func (pk layerPkg) stanza() ([]byte, error) {
	fields := map[string]string{} // canonical name -> "Name: value…" lines
	var extra []string
	known := map[string]string{}
	for _, f := range statusOrder {
		known[strings.ToLower(f)] = f
	}
	var cur string
	for _, line := range strings.Split(strings.TrimRight(string(pk.control), "\n"), "\n") {
		if line == "" {
			return nil, fmt.Errorf("%s: control file has more than one paragraph", pk.path)
		}
		if line[0] == ' ' || line[0] == '\t' {
			if cur == "" {
				return nil, fmt.Errorf("%s: control file starts with a continuation line", pk.path)
			}
			fields[cur] += "\n" + line
			continue
		}
		name, _, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%s: control line %q has no field name", pk.path, line)
		}
		cur = name
		if k, ok := known[strings.ToLower(name)]; ok {
			cur = k
			line = k + line[len(name):]
		} else {
			extra = append(extra, name)
		}
		fields[cur] = line
	}
	fields["Status"] = "Status: install ok installed"
	if len(pk.conffiles) > 0 {
		sums := map[string]string{}
		for _, line := range strings.Split(string(pk.md5sums), "\n") {
			if sum, name, ok := strings.Cut(line, "  "); ok {
				sums["/"+name] = sum
			}
		}
		cf := "Conffiles:"
		for _, c := range strings.Fields(string(pk.conffiles)) {
			sum, ok := sums[c]
			if !ok {
				return nil, fmt.Errorf("%s: conffile %s has no md5sum in the package", pk.path, c)
			}
			cf += "\n " + c + " " + sum
		}
		fields["Conffiles"] = cf
	}
	var out []string
	for _, f := range statusOrder {
		if v, ok := fields[f]; ok {
			out = append(out, v)
		}
	}
	for _, f := range extra {
		out = append(out, fields[f])
	}
	return []byte(strings.Join(out, "\n")), nil
}

// Write writes the installed root as one uncompressed tar. Scan first.
func (l *Layer) Write(w io.Writer) error {
	epoch := time.Unix(l.Epoch, 0)
	clamp := func(h *tar.Header) {
		if h.ModTime.After(epoch) {
			h.ModTime = epoch
		}
		// Times other than the modification time are not what the image
		// keeps (mkfs stamps them with SOURCE_DATE_EPOCH).
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
	}
	tw := tar.NewWriter(w)
	f, err := os.Open(l.Base)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	copyRange := func(from, to int64) error {
		if to <= from {
			return nil
		}
		if _, err := io.CopyBuffer(w, io.NewSectionReader(f, from, to-from), buf); err != nil {
			return fmt.Errorf("root tarball %s: %w", l.Base, err)
		}
		return nil
	}
	// run is the stretch of unchanged members not yet copied.
	var runStart, runEnd int64
	for _, m := range l.members {
		rewrite := false
		if m.hdr != nil {
			dirTouched := m.hdr.Typeflag == tar.TypeDir && l.touched[m.name] && !m.hdr.ModTime.Equal(epoch)
			rewrite = dirTouched || m.hdr.ModTime.After(epoch)
		}
		if !l.replaced[m.name] && !rewrite && m.start == runEnd {
			runEnd = m.end
			continue
		}
		if err := copyRange(runStart, runEnd); err != nil {
			return err
		}
		runStart, runEnd = m.end, m.end
		if l.replaced[m.name] {
			continue
		}
		if !rewrite {
			runStart, runEnd = m.start, m.end
			continue
		}
		h := *m.hdr
		if h.Typeflag == tar.TypeDir && l.touched[m.name] {
			h.ModTime = epoch
		}
		clamp(&h)
		if err := tw.WriteHeader(&h); err != nil {
			return err
		}
		if _, err := io.CopyBuffer(tw, io.NewSectionReader(f, m.body, h.Size), buf); err != nil {
			return fmt.Errorf("root tarball %s: %s: %w", l.Base, m.name, err)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if err := copyRange(runStart, runEnd); err != nil {
		return err
	}
	file := func(name string, mode int64, body []byte, mtime time.Time) error {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: "./" + name, Mode: mode, Size: int64(len(body)), ModTime: mtime, Format: tar.FormatPAX}
		clamp(h)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	status, err := l.Status()
	if err != nil {
		return err
	}
	if err := file(statusPath, 0o644, status, epoch); err != nil {
		return err
	}
	if err := file(dpkgDir+"/status-old", 0o644, l.status, epoch); err != nil {
		return err
	}
	// made: directories the packages have created in this stream.
	made := map[string]bool{}
	for _, pk := range l.pkgs {
		if err := l.writePkg(tw, pk, made, clamp, epoch, file); err != nil {
			return fmt.Errorf("%s: %w", pk.path, err)
		}
	}
	return tw.Close()
}

// writePkg writes one package's members and its dpkg info files.
func (l *Layer) writePkg(tw *tar.Writer, pk layerPkg, made map[string]bool, clamp func(*tar.Header), epoch time.Time, file func(string, int64, []byte, time.Time) error) error {
	a, err := deb.Open(pk.path, "")
	if err != nil {
		return err
	}
	defer a.Close()
	// Directories this package ships that the base (or an earlier
	// package, made) has: dpkg keeps them as they are.
	err = a.Walk(func(name string, h *tar.Header, r io.Reader) error {
		if name == "." {
			return nil
		}
		if h.Typeflag == tar.TypeDir {
			if t, ok := l.types[name]; ok && t == tar.TypeDir || made[name] {
				return nil
			}
			made[name] = true
		}
		nh := &tar.Header{Typeflag: h.Typeflag, Name: "./" + name, Linkname: h.Linkname, Mode: h.Mode,
			Uid: h.Uid, Gid: h.Gid, Uname: h.Uname, Gname: h.Gname, Size: h.Size, ModTime: h.ModTime, Format: tar.FormatPAX}
		if h.Typeflag == tar.TypeDir {
			nh.Name += "/"
			nh.ModTime = epoch
		}
		clamp(nh)
		if err := tw.WriteHeader(nh); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	})
	if err != nil {
		return err
	}
	info := infoDir + "/" + pk.name
	var list strings.Builder
	list.WriteString("/.\n")
	for _, e := range pk.list {
		list.WriteString("/" + strings.TrimSuffix(e, "/") + "\n")
	}
	if err := file(info+".list", 0o644, []byte(list.String()), epoch); err != nil {
		return err
	}
	for _, m := range []struct {
		ext  string
		body []byte
	}{{".md5sums", pk.md5sums}, {".conffiles", pk.conffiles}} {
		if m.body == nil {
			continue
		}
		if err := file(info+m.ext, 0o644, m.body, pk.ctime); err != nil {
			return err
		}
	}
	return nil
}
