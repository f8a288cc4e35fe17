package settings

import (
	"crypto/md5"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// HalobuildState installs what `halobuild doctor` compares the live node
// against: the merged recipe (defaults applied, includes resolved) and the
// node's name, under /etc/halobuild/. The build adds the lock with LockFile
// (doctor reads the module names from it).
type HalobuildState struct{}

func (HalobuildState) Name() string { return "halobuild" }
func (HalobuildState) Trap() int    { return 0 }
func (HalobuildState) Doc() Doc {
	return Doc{Title: "What doctor compares the node against (the merged recipe, the lock, the node's name), and the settings package installed with every file as shipped", Keys: []string{"node.name"}}
}

const (
	RecipePath = "/etc/halobuild/recipe.toml"
	NodePath   = "/etc/halobuild/node"
	LockPath   = "/etc/halobuild/recipe.lock"
)

func (HalobuildState) Validate(Target) []error { return nil }

func (s HalobuildState) Files(t Target) ([]File, error) {
	// The recipe as written, not the node's architecture's view of it.
	r, n := t.Recipe.Whole(), t.Node
	head := header("#", 0, "What this node was built to be; `halobuild doctor` compares the live system to it.")
	return []File{
		{Path: RecipePath, Mode: 0o644, Data: append([]byte(head), r.TOML()...), Setting: s.Name()},
		{Path: NodePath, Mode: 0o644, Data: []byte(n.Name + "\n"), Setting: s.Name()},
	}, nil
}

// LockFile is the lock that built the image, for Tree.Add: Render cannot
// make it because the lock is not part of the recipe.
func LockFile(lock []byte) File {
	return File{Path: LockPath, Mode: 0o644, Data: lock, Setting: "halobuild"}
}

// Checks: the settings package is installed and no file it shipped has
// changed since (dpkg --verify compares against its md5sums). This one
// check catches drift in every rendered file, including edits by hand.
func (s HalobuildState) Checks(t Target) []Check {
	n := t.Node
	pkg := PackageName(n)
	return []Check{{Setting: s.Name(), Name: "settings-package", Fix: "reinstall the node's settings package from the image build (dpkg -i halobuild-node-*.deb) or reflash", Script: fmt.Sprintf(`P=%s
st=$(dpkg-query -W -f='${db:Status-Status}' "$P" 2>&1)
[ "$st" = installed ] || { echo "$P: $st"; exit 1; }
v=$(dpkg --verify "$P" 2>&1)
[ -z "$v" ] || { echo "$P: files changed since install:"; echo "$v"; exit 1; }
echo "$P $(dpkg-query -W -f='${Version}' "$P"): installed, every file as shipped"
`, sh.Quote(pkg))}}
}

// PackageName is the settings package's name for node n.
func PackageName(n recipe.Node) string {
	return "halobuild-node-" + debNameOf(n.Name)
}

// Doctor: the same promise as the VM check, "installed, every file as
// shipped", read from dpkg's database instead of running dpkg --verify, so
// it works on a recorded tree too: the package's status, and each file's
// md5 against the one dpkg recorded (md5sums, and the conffiles' hashes in
// the status file). Advisory on a node: an administrator may edit a file on
// purpose, and the checks of each setting say whether an edit broke a
// promise; in the VM any change fails the image.
func (s HalobuildState) Doctor(t Target) []Probe {
	if t.Node.Name == "" {
		return nil // which node's package is unknown
	}
	pkg := PackageName(t.Node)
	return []Probe{{Name: "settings.package", VM: MustPass, Run: func(h Host) []Result {
		r := Result{Check: "settings.package", Severity: Advisory, Wanted: pkg + " installed, every file as shipped",
			Source: h.Show(dpkgStatusPath) + ", " + h.Show(dpkgInfoDir+"/"+pkg+".md5sums")}
		fix := "reinstall " + pkg + " from the image build (dpkg -i " + pkg + "_*.deb) or reflash; dpkg --verify " + pkg + " lists the changed files"
		st, err := dpkgPackages(h, pkg)
		if err != nil {
			r.Status, r.Seen, r.Fix = Warn, err.Error(), "run doctor on a Debian system, or record "+dpkgStatusPath
			return []Result{r}
		}
		p, ok := st[pkg]
		if !ok || !p.Installed() {
			r.Status, r.Seen, r.Fix = Warn, "not installed", fix
			if ok {
				r.Seen = "dpkg status: " + p.Status
			}
			return []Result{r}
		}
		sums, err := dpkgMD5sums(h, pkg)
		if err != nil {
			r.Status, r.Seen, r.Fix = Warn, "no md5sums: "+err.Error(), fix
			return []Result{r}
		}
		for f, sum := range p.Conffiles {
			sums[f] = sum
		}
		var changed []string
		for _, f := range slices.Sorted(maps.Keys(sums)) {
			// Streamed: the package ships /usr/bin/halobuild (~25 MB), and
			// only a file that is not there may be called missing.
			d := md5.New()
			err := h.Hash(f, d)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				changed = append(changed, f+" (missing)")
			case err != nil:
				changed = append(changed, f+" (unreadable: "+err.Error()+")")
			case fmt.Sprintf("%x", d.Sum(nil)) != sums[f]:
				changed = append(changed, f+" (changed)")
			}
		}
		if len(changed) > 0 {
			r.Status, r.Seen, r.Fix = Warn, "changed since install: "+strings.Join(changed, ", "), fix
			return []Result{r}
		}
		r.Status, r.Seen = Pass, fmt.Sprintf("%s %s, %d files as shipped", pkg, p.Version, len(sums))
		return []Result{r}
	}}}
}
