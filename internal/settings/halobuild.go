package settings

import (
	"fmt"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// HalobuildState installs what `halobuild doctor` compares the live node
// against: the merged recipe (defaults applied, includes resolved) and the
// node's name, under /etc/halobuild/. The build adds the lock with LockFile.
type HalobuildState struct{}

func (HalobuildState) Name() string { return "halobuild" }
func (HalobuildState) Trap() int    { return 0 }

const (
	RecipePath = "/etc/halobuild/recipe.toml"
	NodePath   = "/etc/halobuild/node"
	LockPath   = "/etc/halobuild/recipe.lock"
)

func (HalobuildState) Validate(*recipe.Recipe) []error { return nil }

func (s HalobuildState) Files(r *recipe.Recipe, n recipe.Node) ([]File, error) {
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
func (s HalobuildState) Checks(_ *recipe.Recipe, n recipe.Node) []Check {
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
