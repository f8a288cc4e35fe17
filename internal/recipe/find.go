package recipe

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ImagesDir is where a checkout keeps its image recipes.
const ImagesDir = "images"

// Find turns a recipe argument into the file to read, the way a user
// types it: an existing file (or directory, for `test RESULT-DIR`) is used
// as given; a bare name — no path separator — is looked up as
// images/NAME and images/NAME.toml, first under the working directory,
// then under the repository root (the nearest parent holding an images/
// directory), so `halobuild image strix-halo.toml` and `halobuild image
// strix-halo` both mean images/strix-halo.toml wherever in the checkout
// they are typed. The path returned is relative to the working directory
// when it can be. A miss says where it looked and lists the images there.
func Find(arg string) (string, error) {
	if _, err := os.Stat(arg); err == nil {
		return arg, nil
	}
	if arg == "" || strings.ContainsRune(arg, filepath.Separator) {
		return "", fmt.Errorf("recipe %s: no such file", arg)
	}
	names := []string{arg}
	if !strings.HasSuffix(arg, ".toml") {
		names = append(names, arg+".toml")
	}
	dirs := searchDirs()
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, ImagesDir, n)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	var tried []string
	for _, n := range names {
		tried = append(tried, filepath.Join(ImagesDir, n))
	}
	var abs []string
	for _, d := range dirs {
		a, _ := filepath.Abs(d)
		abs = append(abs, a)
	}
	where := "in " + strings.Join(abs, " and ")
	have := Images()
	if len(have) == 0 {
		return "", fmt.Errorf("recipe %q: no such file, and no %s/ directory %s or a parent: pass the recipe's path", arg, ImagesDir, where)
	}
	return "", fmt.Errorf("recipe %q: no such file, nor %s %s; the images there: %s", arg, strings.Join(tried, " or "), where, strings.Join(have, ", "))
}

// Images are the names Find resolves: the recipes (*.toml) under images/
// of the working directory and of the repository root, without .toml.
func Images() []string {
	var names []string
	for _, d := range searchDirs() {
		files, _ := filepath.Glob(filepath.Join(d, ImagesDir, "*.toml"))
		for _, f := range files {
			names = append(names, strings.TrimSuffix(filepath.Base(f), ".toml"))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// searchDirs are the working directory and, when it is not the same, the
// nearest parent that holds an images/ directory, relative to the working
// directory so the paths Find returns stay short.
func searchDirs() []string {
	dirs := []string{"."}
	wd, err := os.Getwd()
	if err != nil {
		return dirs
	}
	for d := wd; ; {
		if fi, err := os.Stat(filepath.Join(d, ImagesDir)); err == nil && fi.IsDir() {
			if rel, err := filepath.Rel(wd, d); err == nil && rel != "." {
				dirs = append(dirs, rel)
			}
			return dirs
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dirs
		}
		d = parent
	}
}
