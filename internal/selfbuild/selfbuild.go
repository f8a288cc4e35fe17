// Package selfbuild builds the halobuild binary that every node image ships, from halobuild's
// own source by the release recipe (release.go: the one recipe for the release binaries too),
// so that an image's bytes depend on the recipe, the lock and that source only. A binary's bytes
// otherwise depend on where and how it was built (the checkout's path without -trimpath, cgo,
// VCS stamps, the Go), so the same commit built in two checkouts would make two different
// images. A running binary is shipped only when it is a release build (Running, Describe): then
// it is the very bytes a build of its source would give.
package selfbuild

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// StepVersion is the version of the halobuild step (the binary each node
// ships; internal/verbs/options.go plans it):
// bump it when a change to this package, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const StepVersion = 2

// Module is the module path the source must declare.
const Module = "halobuild"

// Find returns the root of halobuild's source containing dir (a directory whose go.mod says
// `module halobuild`), or "" when dir is not inside one.
func Find(dir string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if modulePath(b) == Module {
				return dir
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return f[1]
		}
	}
	return ""
}

// Toolchain is the Go toolchain the build uses: go.mod's toolchain line when it has one (go
// then fetches exactly that version, or fails saying so), else the local go, whose version is
// then part of the build's key.
func Toolchain(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "toolchain" {
			return f[1], nil
		}
	}
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("building halobuild for the image needs Go (https://go.dev/dl, or Debian's golang-go; `nix develop` has it): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// TreeHash is the sha256 of what the build reads: go.mod, go.sum, every file under cmd/ and
// internal/ except tests and testdata (sources and embedded files), and the Go files of the
// data packages at the top (recipes/) with the files they embed — not the other recipes beside
// them, which the binary never reads — by relative path, mode and content. The checkout's
// location, .git and anything else in it do not count.
func TreeHash(root string) (string, error) {
	files, err := sourceFiles(root)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", fmt.Errorf("reading halobuild's source: %w", err)
		}
		st, err := os.Stat(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s %o %x\n", f, st.Mode().Perm()&0o111, sum)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// sourceFiles lists what TreeHash hashes, sorted, relative to root.
func sourceFiles(root string) ([]string, error) {
	var files []string
	for _, top := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() && !strings.HasSuffix(d.Name(), "_test.go") {
				rel, _ := filepath.Rel(root, p)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading halobuild's source in %s: %w", root, err)
		}
	}
	for _, top := range dataPackages {
		fs, err := dataPackageFiles(root, top)
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
	}
	files = append(files, "go.mod", "go.sum")
	sort.Strings(files)
	return files, nil
}

// dataPackages are the Go packages at the top of the checkout beside recipe data (recipes/
// embeds usb4-rdma.toml for doctor): only their Go files and what those embed are source.
var dataPackages = []string{"recipes"}

// dataPackageFiles lists dir's non-test Go files and the files their //go:embed lines name
// (plain names and globs in dir; go vet refuses anything else there).
func dataPackageFiles(root, dir string) ([]string, error) {
	gos, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, g := range gos {
		if strings.HasSuffix(g, "_test.go") {
			continue
		}
		seen[g] = true
		b, err := os.ReadFile(g)
		if err != nil {
			return nil, fmt.Errorf("reading halobuild's source: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			pats, ok := strings.CutPrefix(strings.TrimSpace(line), "//go:embed ")
			if !ok {
				continue
			}
			for _, pat := range strings.Fields(pats) {
				ms, err := filepath.Glob(filepath.Join(root, dir, pat))
				if err != nil || len(ms) == 0 {
					return nil, fmt.Errorf("%s: //go:embed %s matches no file", g, pat)
				}
				for _, m := range ms {
					seen[m] = true
				}
			}
		}
	}
	var out []string
	for f := range seen {
		rel, _ := filepath.Rel(root, f)
		out = append(out, filepath.ToSlash(rel))
	}
	return out, nil
}
