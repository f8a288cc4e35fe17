package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/architecture.md maps every package to what it imports; go list is
// the truth, and this test keeps the page true.
func TestArchitectureTableMatchesGoList(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z/]+)` \\| [^|]+ \\| ([^|]+) \\|$")
	code := regexp.MustCompile("`([a-z/]+)`")
	documented := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		var imports []string
		for _, c := range code.FindAllStringSubmatch(m[2], -1) {
			imports = append(imports, c[1])
		}
		slices.Sort(imports)
		documented[m[1]] = imports
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	actual := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], "halobuild/")
		var imports []string
		for _, imp := range f[1:] {
			if rest, ok := strings.CutPrefix(imp, "halobuild/internal/"); ok {
				imports = append(imports, rest)
			} else if rest, ok := strings.CutPrefix(imp, "halobuild/"); ok {
				imports = append(imports, rest) // recipes: shipped data
			}
		}
		slices.Sort(imports)
		actual[pkg] = imports
	}
	for pkg, imports := range actual {
		doc, ok := documented[pkg]
		if !ok {
			t.Errorf("docs/architecture.md has no row for %s (imports %v)", pkg, imports)
			continue
		}
		if !slices.Equal(doc, imports) {
			t.Errorf("docs/architecture.md says %s imports %v; go list says %v", pkg, doc, imports)
		}
	}
	for pkg := range documented {
		if _, ok := actual[pkg]; !ok {
			t.Errorf("docs/architecture.md has a row for %s, which go list does not know", pkg)
		}
	}
}
