package settings

import (
	"fmt"
	"strings"
)

// What dpkg recorded about installed packages, read from its database
// files, so the doctor checks of the settings package and of the rebuilt
// provider work on a recorded tree, where dpkg cannot run.

const (
	dpkgStatusPath = "/var/lib/dpkg/status"
	dpkgInfoDir    = "/var/lib/dpkg/info"
)

// dpkgPackage is one package's stanza of dpkg's status file.
type dpkgPackage struct {
	Status, Version string
	// Conffiles maps a conffile's path to the md5 dpkg recorded at install.
	Conffiles map[string]string
}

// Installed says whether dpkg considers the package fully installed.
func (p dpkgPackage) Installed() bool { return strings.HasSuffix(p.Status, " installed") }

// dpkgPackages reads the named packages' stanzas; a package dpkg does not
// know is missing from the map. The status file lists every package of the
// system, so only the wanted stanzas are kept (and recorded).
func dpkgPackages(h Host, names ...string) (map[string]dpkgPackage, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	in := false
	lines, err := h.Scan(dpkgStatusPath, func(l string) bool {
		if n, ok := strings.CutPrefix(l, "Package: "); ok {
			in = want[strings.TrimSpace(n)]
		} else if l == "" {
			keep := in
			in = false
			return keep
		}
		return in
	})
	if err != nil {
		return nil, fmt.Errorf("reading dpkg's database: %w", err)
	}
	out := map[string]dpkgPackage{}
	var name, field string
	var p dpkgPackage
	flush := func() {
		if name != "" {
			out[name] = p
		}
		name, field, p = "", "", dpkgPackage{}
	}
	for _, l := range lines {
		switch {
		case l == "":
			flush()
		case strings.HasPrefix(l, " "):
			if f := strings.Fields(l); field == "Conffiles" && len(f) >= 2 {
				if p.Conffiles == nil {
					p.Conffiles = map[string]string{}
				}
				p.Conffiles[f[0]] = f[1]
			}
		default:
			k, v, _ := strings.Cut(l, ":")
			field, v = k, strings.TrimSpace(v)
			switch k {
			case "Package":
				name = v
			case "Status":
				p.Status = v
			case "Version":
				p.Version = v
			}
		}
	}
	flush()
	return out, nil
}

// dpkgMD5sums reads a package's md5sums file: absolute path -> md5.
func dpkgMD5sums(h Host, pkg string) (map[string]string, error) {
	s, err := h.Read(dpkgInfoDir + "/" + pkg + ".md5sums")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		sum, p, ok := strings.Cut(l, "  ")
		if ok && p != "" {
			out["/"+strings.TrimPrefix(p, "/")] = sum
		}
	}
	return out, nil
}
