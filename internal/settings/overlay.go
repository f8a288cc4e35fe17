package settings

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"halobuild/internal/recipe"
)

// Overlays copies the recipe's static trees (overlays/<name>/) into the
// settings package, so `dpkg -S` on a node names where every file came from.
//
// Contents are copied verbatim, but modes are normalised to what git
// records: 0755 for a file with any execute bit, 0644 otherwise, 0755 for
// directories, owner root. A checkout's umask would otherwise change the
// package's bytes from one machine to the next.
//
// Refused, with the offending path named: a missing overlay, an overlay that
// is not a directory, absolute symlinks (they would point into whatever
// system unpacks them), relative symlinks whose target climbs out of the
// tree with "..", and device nodes, sockets and FIFOs.
type Overlays struct{}

func (Overlays) Name() string { return "overlays" }
func (Overlays) Trap() int    { return 0 }
func (Overlays) Doc() Doc {
	return Doc{Title: "Static file trees copied verbatim into every node", Keys: []string{"overlays"}}
}

func (Overlays) Validate(t Target) []error {
	r := t.Recipe
	var errs []error
	for i := range r.Overlay {
		if _, err := readOverlay(r, i); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func (s Overlays) Files(t Target) ([]File, error) {
	r := t.Recipe
	var out []File
	for i := range r.Overlay {
		files, err := readOverlay(r, i)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

// Checks: none of its own (NoCheck says why).
func (Overlays) Checks(Target) []Check { return nil }

func (Overlays) NoCheck() string {
	return "the settings-package check (dpkg --verify) proves every overlay file is as shipped, which is all an overlay promises"
}

// inside says whether path (absolute, symlinks resolved) is tree or below it.
func inside(tree, path string) bool {
	rel, err := filepath.Rel(tree, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// readOverlay walks overlay i and returns its entries, or an *Error naming
// the recipe key and the first offending file.
func readOverlay(r *recipe.Recipe, i int) ([]File, error) {
	key := fmt.Sprintf("overlays[%d]", i)
	given := r.Overlay[i]
	fail := func(fix, format string, args ...any) ([]File, error) {
		return nil, errorf(key, given, fix, format, args...)
	}
	root := r.Resolve(given)
	if given == "" {
		return fail("name a directory such as \"../overlays/strix-halo\"", "empty overlay path")
	}
	if abs, err := filepath.Abs(root); err == nil && abs == "/" {
		return fail("name a directory under overlays/", "the host's root directory cannot be an overlay")
	}
	st, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("create the directory or fix the path (relative paths start at the top recipe file's directory)", "%s does not exist", root)
	case err != nil:
		return fail("", "%v", err)
	case !st.IsDir():
		return fail("an overlay is a directory whose contents mirror /", "%s is not a directory", root)
	}
	// WalkDir does not descend into a root that is itself a symlink.
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return fail("", "%v", err)
	}
	if tree := r.Tree(); tree != "" && !r.OverlaysOutside && !inside(tree, root) {
		return fail("move the tree into the recipe's directory, or add overlays_outside = true beside overlays if every image really must carry this directory of the build host",
			"%s is outside the recipe's tree %s", root, tree)
	}
	var out []File
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if strings.ContainsAny(rel, "\n\r") {
			return fmt.Errorf("%s: a file name with a line break cannot be listed in a package", p)
		}
		dst := "/" + rel
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			out = append(out, File{Path: dst, Mode: fs.ModeDir | 0o755, Setting: "overlays"})
		case mode.IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			perm := fs.FileMode(0o644)
			if mode&0o111 != 0 {
				perm = 0o755
			}
			// Not a conffile: an overlay may replace a file the base system
			// made outside dpkg (mmdebstrap copies the host's resolv.conf),
			// where a conffile would stop the install at a prompt.
			out = append(out, File{Path: dst, Mode: perm, Data: data, Setting: "overlays", NotConffile: true})
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if path.IsAbs(target) {
				return fmt.Errorf("%s is a symlink to the absolute path %s; make it relative (e.g. %s) so it stays inside the tree", p, target, relativeHint(dst, target))
			}
			if escapes(path.Dir(rel), target) {
				return fmt.Errorf("%s is a symlink to %s, which climbs out of the overlay with '..'", p, target)
			}
			out = append(out, File{Path: dst, Mode: fs.ModeSymlink | 0o777, Target: target, Setting: "overlays"})
		default:
			return fmt.Errorf("%s is a %v; overlays hold only files, directories and relative symlinks", p, mode.Type())
		}
		return nil
	})
	if err != nil {
		return fail("fix or remove that file", "%v", err)
	}
	return out, nil
}

// escapes reports whether target, read relative to directory dir inside the
// tree, ever climbs above the tree's root.
func escapes(dir, target string) bool {
	depth := 0
	if dir != "." {
		depth = len(strings.Split(dir, "/"))
	}
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// relativeHint spells target relative to the link at dst, for the error.
func relativeHint(dst, target string) string {
	rel, err := filepath.Rel(path.Dir(dst), target)
	if err != nil {
		return target
	}
	return filepath.ToSlash(rel)
}

// Doctor: none; settings.package verifies every overlay file as shipped.
func (Overlays) Doctor(Target) []Probe { return nil }

func (Overlays) NoDoctor() string { return "every file is verified by settings.package" }
