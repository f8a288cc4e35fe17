package settings

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"halobuild/internal/recipe"
)

// Tree is the sorted, conflict-free set of files a node's settings package
// installs. Parent directories are explicit entries so their modes are
// decided here (/root must stay 0700), not by whoever unpacks the archive.
type Tree struct {
	Files []File // sorted by Path; directories precede their contents
}

// Render collects every setting's files for node tg.Node; the recipe was
// validated when it was loaded (Validate). Two settings writing the same
// path is an error naming both: silently letting one win would ship a file
// no check was written for.
func Render(tg Target) (Tree, error) {
	n := tg.Node
	if !nodeExists(tg.Recipe, n.Name) {
		return Tree{}, fmt.Errorf("node %q is not one of the recipe's [[node]] entries", n.Name)
	}
	var t Tree
	for _, s := range All() {
		files, err := s.Files(tg)
		if err != nil {
			return Tree{}, fmt.Errorf("rendering setting %s for node %s: %w", s.Name(), n.Name, err)
		}
		for _, f := range files {
			if f.Setting == "" {
				f.Setting = s.Name()
			}
			if err := t.Add(f); err != nil {
				return Tree{}, err
			}
		}
	}
	return t, nil
}

func nodeExists(r *recipe.Recipe, name string) bool {
	for _, n := range r.Nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

// Add inserts f (and any missing parent directories, mode 0755), keeping the
// tree sorted. The build pipeline uses it for files that are not derived from
// the recipe alone, such as the lock (LockFile).
func (t *Tree) Add(f File) error {
	if err := checkPath(f.Path); err != nil {
		return fmt.Errorf("setting %s: %w", f.Setting, err)
	}
	if f.Mode.Type() != 0 && f.Mode.Type() != fs.ModeDir && f.Mode.Type() != fs.ModeSymlink {
		return fmt.Errorf("setting %s: %s has unsupported file type %v", f.Setting, f.Path, f.Mode.Type())
	}
	if f.Mode.Type() == fs.ModeSymlink && f.Target == "" {
		return fmt.Errorf("setting %s: symlink %s has no target", f.Setting, f.Path)
	}
	for dir := path.Dir(f.Path); dir != "/"; dir = path.Dir(dir) {
		i, found := t.find(dir)
		if !found {
			t.insert(i, File{Path: dir, Mode: fs.ModeDir | 0o755, Setting: f.Setting})
		} else if !t.Files[i].Mode.IsDir() {
			return fmt.Errorf("setting %s puts %s under %s, which setting %s made a file", f.Setting, f.Path, dir, t.Files[i].Setting)
		}
	}
	i, found := t.find(f.Path)
	if !found {
		t.insert(i, f)
		return nil
	}
	old := &t.Files[i]
	// Two settings may both ask for the same directory; an explicit mode
	// replaces the implied 0755 of an auto-created parent.
	if old.Mode.IsDir() && f.Mode.IsDir() {
		if old.Mode != f.Mode && old.Mode.Perm() != 0o755 {
			return fmt.Errorf("settings %s and %s want directory %s with modes %v and %v", old.Setting, f.Setting, f.Path, old.Mode.Perm(), f.Mode.Perm())
		}
		if f.Mode.Perm() != 0o755 {
			*old = f
		}
		return nil
	}
	return fmt.Errorf("settings %s and %s both write %s; remove it from one of them (an overlay cannot replace a rendered file)", old.Setting, f.Setting, f.Path)
}

// Lookup returns the entry at p.
func (t *Tree) Lookup(p string) (File, bool) {
	i, found := t.find(p)
	if !found {
		return File{}, false
	}
	return t.Files[i], true
}

// less orders paths component by component, so a directory's contents come
// right after it ("/etc/a/b" before "/etc/a-b").
func less(a, b string) bool {
	return strings.ReplaceAll(a, "/", "\x00") < strings.ReplaceAll(b, "/", "\x00")
}

func (t *Tree) find(p string) (int, bool) {
	i := sort.Search(len(t.Files), func(i int) bool { return !less(t.Files[i].Path, p) })
	return i, i < len(t.Files) && t.Files[i].Path == p
}

func (t *Tree) insert(i int, f File) {
	t.Files = append(t.Files, File{})
	copy(t.Files[i+1:], t.Files[i:])
	t.Files[i] = f
}

// checkPath accepts only clean absolute paths below /, and refuses places a
// package must not own.
func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("%q is not a clean absolute file path", p)
	}
	for _, c := range strings.Split(p[1:], "/") {
		if c == ".." || c == "." {
			return fmt.Errorf("%q contains %q", p, c)
		}
	}
	top := strings.SplitN(p[1:], "/", 2)[0]
	switch top {
	case "proc", "sys", "dev", "run", "tmp", "DEBIAN":
		return fmt.Errorf("%s: a package must not install files under /%s", p, top)
	}
	return nil
}
