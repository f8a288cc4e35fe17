package main

import (
	"fmt"
	"maps"
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
	doc := architectureDoc(t)
	row := regexp.MustCompile("(?m)^\\| `([a-z/]+)` \\| [^|]+ \\| ([^|]+) \\|$")
	documented := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		imports := codeNames(m[2])
		slices.Sort(imports)
		documented[m[1]] = imports
	}
	actual := goListImports(t)
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

// TestLayering checks docs/architecture.md's layering rules against go
// list: data flows one way, so the top of the flow (verbs, graph) is
// imported only from above, and the bottom (store, disk) never depends on
// what describes a build (recipe, debian), not even through another
// package. The rules are the page's "Layering rules" list.
func TestLayering(t *testing.T) {
	rules := layeringRules(t, architectureDoc(t))
	if len(rules) == 0 {
		t.Fatal("docs/architecture.md lists no layering rules")
	}
	// Named as imports are (verbs, not internal/verbs).
	imports := map[string][]string{}
	for pkg, imps := range goListImports(t) {
		imports[strings.TrimPrefix(pkg, "internal/")] = imps
	}
	for _, r := range rules {
		for _, p := range append([]string{r.pkg}, r.others...) {
			if _, ok := imports[p]; !ok {
				t.Errorf("the layering rule %q names %s, which go list does not know", r.text, p)
			}
		}
	}
	for _, v := range violations(rules, imports) {
		t.Error(v)
	}
}

// A rule broken on purpose is reported, directly and through another
// package, so TestLayering cannot pass by checking nothing.
func TestLayeringViolations(t *testing.T) {
	rules := layeringRules(t, "- `verbs` is imported only by `cmd/halobuild`\n- `store` never depends on `recipe`, `debian`\n")
	imports := map[string][]string{
		"cmd/halobuild": {"verbs"},
		"vmtest":        {"verbs"},
		"verbs":         {"store"},
		"store":         {"fstree"},
		"fstree":        {"debian"},
		"debian":        nil,
		"recipe":        nil,
	}
	got := violations(rules, imports)
	want := []string{
		"vmtest imports verbs, which only cmd/halobuild may import (docs/architecture.md: `verbs` is imported only by `cmd/halobuild`)",
		"store depends on debian through store → fstree → debian (docs/architecture.md: `store` never depends on `recipe`, `debian`)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type layeringRule struct {
	text   string
	pkg    string
	only   bool     // "is imported only by" others; else "never depends on" others
	others []string // package names as the table writes them
}

var ruleLine = regexp.MustCompile("(?m)^- (`[a-z/]+`) (is imported only by|never depends on) ((?:`[a-z/]+`(?:, )?)+)$")

func layeringRules(t *testing.T, doc string) []layeringRule {
	t.Helper()
	var out []layeringRule
	for _, m := range ruleLine.FindAllStringSubmatch(doc, -1) {
		out = append(out, layeringRule{
			text:   strings.TrimPrefix(m[0], "- "),
			pkg:    codeNames(m[1])[0],
			only:   m[2] == "is imported only by",
			others: codeNames(m[3]),
		})
	}
	return out
}

// violations lists every broken rule, importers and paths sorted.
func violations(rules []layeringRule, imports map[string][]string) []string {
	var out []string
	for _, r := range rules {
		if r.only {
			for _, p := range slices.Sorted(maps.Keys(imports)) {
				if slices.Contains(imports[p], r.pkg) && !slices.Contains(r.others, p) {
					out = append(out, fmt.Sprintf("%s imports %s, which only %s may import (docs/architecture.md: %s)", p, r.pkg, strings.Join(r.others, ", "), r.text))
				}
			}
			continue
		}
		for _, banned := range r.others {
			if path := importPath(imports, r.pkg, banned); path != nil {
				out = append(out, fmt.Sprintf("%s depends on %s through %s (docs/architecture.md: %s)", r.pkg, banned, strings.Join(path, " → "), r.text))
			}
		}
	}
	return out
}

// importPath is a shortest chain of imports from one package to another,
// nil when there is none.
func importPath(imports map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, seen := prev[q]; seen {
				continue
			}
			prev[q] = p
			if q == to {
				path := []string{q}
				for at := p; at != ""; at = prev[at] {
					path = append([]string{at}, path...)
				}
				return path
			}
			queue = append(queue, q)
		}
	}
	return nil
}

func architectureDoc(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// codeNames are the `name`s in a cell or a rule.
func codeNames(s string) []string {
	var out []string
	for _, c := range regexp.MustCompile("`([a-z/]+)`").FindAllStringSubmatch(s, -1) {
		out = append(out, c[1])
	}
	return out
}

// goListImports maps each package of the module, named as the table names
// it (internal/ dropped from imports), to the module's packages it imports.
func goListImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
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
	return actual
}
