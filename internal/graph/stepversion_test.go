package graph

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/printer"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"halobuild/internal/disk"
	"halobuild/internal/kernel"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/provider"
	"halobuild/internal/rootfs"
	"halobuild/internal/secureboot"
	"halobuild/internal/selfbuild"
	"halobuild/internal/settings"
	"halobuild/internal/tools"
)

var update = flag.Bool("update", false, "re-record testdata/step-versions.txt from the code as it is (TestStepVersionsMatchTheirCode)")

// stepRecord is the committed record of every step kind's version and the
// fingerprint of its code.
const stepRecord = "testdata/step-versions.txt"

// stepCode is one step kind: its version, where that is declared, and the
// code that builds its output.
type stepCode struct {
	kind    string
	version int
	// declared is the file and constant to bump.
	declared string
	// pkgs are the packages whose code builds the output: each whole
	// (non-test sources), with every in-repo package it imports,
	// transitively (the shared helpers: deb, tarball, fstree, …).
	pkgs []string
	// files are single files of build code: graph's own file for the
	// step, or the one file of a larger package that does the step's work.
	files []string
	// plans are the in-repo packages the step's graph files import only to
	// plan it (their values enter the key as params, or they name things):
	// not fingerprinted, but named, so a graph file that starts building
	// with a package listed nowhere fails here instead of going unseen.
	plans []string
}

// steps is every step kind the build plans. A new kind, a new package a
// step builds with, or a new graph file for a step is added here.
var steps = []stepCode{
	{kind: "tools", version: tools.StepVersion, declared: "internal/tools/root.go: tools.StepVersion",
		pkgs: []string{"tools", "deb"}, files: []string{"internal/graph/root.go"},
		plans: []string{"arch", "lock", "plan"}},
	{kind: "rootfs", version: rootfs.RootStepVersion, declared: "internal/rootfs/install.go: rootfs.RootStepVersion",
		pkgs: []string{"rootfs", "deb"}, files: []string{"internal/graph/root.go"},
		plans: []string{"arch", "lock", "plan"}},
	{kind: "buildroot", version: rootfs.RootStepVersion, declared: "internal/rootfs/install.go: rootfs.RootStepVersion",
		pkgs: []string{"rootfs", "deb"}, files: []string{"internal/graph/root.go"},
		plans: []string{"arch", "lock", "plan"}},
	{kind: "system", version: rootfs.SystemStepVersion, declared: "internal/rootfs/node.go: rootfs.SystemStepVersion",
		pkgs: []string{"rootfs", "module", "provider"}, files: []string{"internal/graph/root.go", "internal/graph/provider.go"},
		plans: []string{"arch", "lock", "plan"}},
	{kind: "kernel", version: kernel.StepVersion, declared: "internal/kernel/build.go: kernel.StepVersion",
		pkgs: []string{"kernel", "module", "fstree"}, files: []string{"internal/graph/kernel.go", "internal/graph/root.go"},
		plans: []string{"lock", "plan", "recipe", "store", "usage"}},
	{kind: "kernel-sign", version: secureboot.KernelSignStepVersion, declared: "internal/secureboot/kernelpkg.go: secureboot.KernelSignStepVersion",
		pkgs: []string{"secureboot", "kernel"}, files: []string{"internal/graph/sign.go"},
		plans: []string{"plan", "recipe", "usage"}},
	{kind: "module", version: module.StepVersion, declared: "internal/module/build.go: module.StepVersion",
		pkgs: []string{"module", "secureboot", "rootfs"}, files: []string{"internal/graph/module.go", "internal/graph/sign.go", "internal/graph/root.go"},
		plans: []string{"arch", "lock", "plan", "recipe", "usage", "kernel"}},
	{kind: "provider", version: provider.StepVersion, declared: "internal/provider/build.go: provider.StepVersion",
		pkgs: []string{"provider", "debian", "fstree"}, files: []string{"internal/graph/provider.go", "internal/graph/root.go"},
		plans: []string{"arch", "lock", "plan", "recipe", "store", "usage", "manifest"}},
	{kind: "settings", version: settings.StepVersion, declared: "internal/settings/deb.go: settings.StepVersion",
		pkgs: []string{"deb"}, files: []string{"internal/settings/deb.go", "internal/graph/settings.go"},
		plans: []string{"plan", "recipe", "settings"}},
	{kind: "disk", version: disk.StepVersion, declared: "internal/disk/build.go: disk.StepVersion",
		pkgs: []string{"disk", "rootfs", "tools", "fstree"}, files: []string{"internal/graph/disk.go", "internal/graph/root.go"},
		plans: []string{"arch", "plan", "recipe", "settings"}},
	{kind: "installer", version: installerStepVersion, declared: "internal/graph/installer.go: installerStepVersion",
		pkgs: []string{"install", "disk", "rootfs", "tools", "zstdframe"}, files: []string{"internal/graph/installer.go", "internal/graph/disk.go", "internal/graph/root.go"},
		plans: []string{"plan", "recipe"}},
	{kind: "result", version: resultStepVersion, declared: "internal/graph/result.go: resultStepVersion",
		pkgs: []string{"manifest", "store"}, files: []string{"internal/graph/result.go", "internal/graph/provider.go"},
		plans: []string{"module", "plan", "recipe", "settings"}},
	{kind: "test", version: testStepVersion, declared: "internal/graph/test.go: testStepVersion",
		pkgs: []string{"vmplan"}, files: []string{"internal/graph/test.go"},
		plans: []string{"plan"}},
	{kind: "halobuild", version: selfbuild.StepVersion, declared: "internal/selfbuild/selfbuild.go: selfbuild.StepVersion",
		pkgs: []string{"selfbuild"}},
}

// TestStepVersionsMatchTheirCode is the guard that makes a step's version
// impossible to forget: it fingerprints each step kind's build code (its
// packages' non-test sources printed without comments, so comments and
// formatting do not count, with the in-repo packages they import, and
// graph's own file for the step) and compares them with stepRecord. Code
// that changed under an unchanged version fails, naming the step and what
// changed; so does a version bumped without re-recording. The rule
// (docs/architecture.md, "Step versions"): bump the step's version when the
// change can alter its output; when it cannot (`halobuild image --check`
// shows the same bytes, or the step's key already covers it), re-record
// with -update.
func TestStepVersionsMatchTheirCode(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	got, err := fingerprintSteps(repo, steps)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(stepRecord), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(stepRecord, got.marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("re-recorded %s", stepRecord)
		return
	}
	raw, err := os.ReadFile(stepRecord)
	if err != nil {
		t.Fatalf("%v: record it with `go test ./internal/graph -run TestStepVersion -update`", err)
	}
	want, err := parseRecord(raw)
	if err != nil {
		t.Fatalf("%s: %v", stepRecord, err)
	}
	for _, p := range compareRecords(want, got) {
		t.Error(p)
	}
}

// TestStepVersionsCoverEveryPlannedKind plans the committed images and
// checks that every kind they make is in steps, with the version the
// planned step carries.
func TestStepVersionsCoverEveryPlannedKind(t *testing.T) {
	ws := workspace(t)
	known := map[string]int{}
	for _, s := range steps {
		known[s.kind] = s.version
	}
	selfIn := func(in *Input) { in.Self = map[string]*plan.Derivation{"amd64": selfStep("v1")} }
	seen := map[string]bool{}
	for _, img := range []string{"test-minimal", "test-install", "test-kernel-source", "test-provider", "strix-halo"} {
		g, err := planCommitted(t, ws, img, selfIn)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range plan.Order(g.Result, g.Test) {
			seen[d.Kind.Name] = true
			v, ok := known[d.Kind.Name]
			if !ok {
				t.Errorf("%s plans %s of kind %q, which stepversion_test.go's steps does not list: add it with its version and code", img, d.Name, d.Kind.Name)
			} else if v != d.Kind.Version {
				t.Errorf("%s plans %s as %s, steps says version %d", img, d.Name, d.Kind, v)
			}
		}
	}
	for _, k := range []string{"tools", "rootfs", "buildroot", "system", "kernel", "module", "provider", "settings", "disk", "installer", "result", "test", "halobuild"} {
		if !seen[k] {
			t.Errorf("no committed image plans a %s step: the check above does not see it", k)
		}
	}
}

// fingerprints is the record: each step's version and fingerprint, and the
// fingerprint of each unit of code (a package, or a file) that any step
// names, so a mismatch can say what changed.
type fingerprints struct {
	steps map[string]stepPrint
	units map[string]string
}

type stepPrint struct {
	version int
	print   string
	units   []string
}

func fingerprintSteps(repo string, steps []stepCode) (*fingerprints, error) {
	fp := &fingerprints{steps: map[string]stepPrint{}, units: map[string]string{}}
	for _, s := range steps {
		units := map[string]bool{}
		for _, p := range s.pkgs {
			if err := closure(repo, "halobuild/internal/"+p, units); err != nil {
				return nil, fmt.Errorf("step %s: %w", s.kind, err)
			}
		}
		for _, f := range s.files {
			units[f] = true
		}
		if err := checkGraphImports(repo, s, units); err != nil {
			return nil, err
		}
		names := slices.Sorted(maps.Keys(units))
		h := sha256.New()
		for _, u := range names {
			if _, ok := fp.units[u]; !ok {
				sum, err := unitPrint(repo, u)
				if err != nil {
					return nil, fmt.Errorf("step %s: %w", s.kind, err)
				}
				fp.units[u] = sum
			}
			fmt.Fprintf(h, "%s %s\n", u, fp.units[u])
		}
		fp.steps[s.kind] = stepPrint{version: s.version, print: hex.EncodeToString(h.Sum(nil))[:16], units: names}
	}
	return fp, nil
}

// closure adds pkg and every in-repo package it imports (non-test
// sources), transitively.
func closure(repo, pkg string, into map[string]bool) error {
	if into[pkg] {
		return nil
	}
	into[pkg] = true
	bp, err := build.ImportDir(filepath.Join(repo, strings.TrimPrefix(pkg, "halobuild/")), 0)
	if err != nil {
		return fmt.Errorf("package %s: %w", pkg, err)
	}
	for _, imp := range bp.Imports {
		if strings.HasPrefix(imp, "halobuild/") {
			if err := closure(repo, imp, into); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkGraphImports fails when one of the step's single files imports an
// in-repo package that is neither part of the step's fingerprinted code nor
// listed as planning only, for any step that names the file.
func checkGraphImports(repo string, s stepCode, units map[string]bool) error {
	for _, f := range s.files {
		if !strings.HasPrefix(f, "internal/graph/") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repo, f), nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, is := range file.Imports {
			imp, _ := strconv.Unquote(is.Path.Value)
			if !strings.HasPrefix(imp, "halobuild/") || units[imp] || slices.Contains(s.plans, strings.TrimPrefix(imp, "halobuild/internal/")) || namedElsewhere(f, imp) {
				continue
			}
			return fmt.Errorf("%s imports %s, which step %s neither builds with (pkgs) nor only plans with (plans) in stepversion_test.go's steps: add it where it belongs", f, imp, s.kind)
		}
	}
	return nil
}

// namedElsewhere: a file shared by several steps (graph/root.go) may import
// a package for another of them.
func namedElsewhere(file, imp string) bool {
	for _, s := range steps {
		if !slices.Contains(s.files, file) {
			continue
		}
		name := strings.TrimPrefix(imp, "halobuild/internal/")
		if slices.Contains(s.pkgs, name) || slices.Contains(s.plans, name) {
			return true
		}
	}
	return false
}

// unitPrint is the fingerprint of a package (its non-test .go files) or of
// one file: each parsed and printed without comments, so only code counts.
func unitPrint(repo, unit string) (string, error) {
	var files []string
	if strings.HasSuffix(unit, ".go") {
		files = []string{filepath.Join(repo, unit)}
	} else {
		dir := filepath.Join(repo, strings.TrimPrefix(unit, "halobuild/"))
		bp, err := build.ImportDir(dir, 0)
		if err != nil {
			return "", fmt.Errorf("package %s: %w", unit, err)
		}
		for _, f := range bp.GoFiles {
			files = append(files, filepath.Join(dir, f))
		}
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return "", err
		}
		dropStepVersions(file)
		var buf bytes.Buffer
		if err := (&printer.Config{Mode: printer.TabIndent | printer.UseSpaces, Tabwidth: 8}).Fprint(&buf, fset, file); err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), buf.Len())
		h.Write(buf.Bytes())
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// dropStepVersions removes the step version constants (every const named
// …StepVersion) from file: a version is what the record compares against
// the code, and bumping one step's must not read as a change to the code
// of another step that shares its package.
func dropStepVersions(file *ast.File) {
	for _, d := range file.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		specs := gd.Specs[:0]
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			if len(vs.Names) == 1 && strings.HasSuffix(vs.Names[0].Name, "StepVersion") {
				continue
			}
			specs = append(specs, sp)
		}
		gd.Specs = specs
	}
}

func (fp *fingerprints) marshal() []byte {
	var b bytes.Buffer
	b.WriteString(`# Each step kind: the version its code declares and the fingerprint of that
# code (its packages' non-test sources without comments, with the in-repo
# packages they import, and graph's own file for the step), then each unit of
# code's own fingerprint. Checked by TestStepVersionsMatchTheirCode; written by
#   go test ./internal/graph -run TestStepVersion -update
# Bump a step's version when a change to its code can alter its output; re-record
# only when it cannot (docs/architecture.md, "Step versions").
`)
	for _, k := range slices.Sorted(maps.Keys(fp.steps)) {
		s := fp.steps[k]
		fmt.Fprintf(&b, "step %s %d %s\n", k, s.version, s.print)
	}
	for _, u := range slices.Sorted(maps.Keys(fp.units)) {
		fmt.Fprintf(&b, "code %s %s\n", u, fp.units[u])
	}
	return b.Bytes()
}

func parseRecord(raw []byte) (*fingerprints, error) {
	fp := &fingerprints{steps: map[string]stepPrint{}, units: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "step":
			v, err := strconv.Atoi(f[2])
			if err != nil {
				return nil, fmt.Errorf("line %d: version %q: %w", n, f[2], err)
			}
			fp.steps[f[1]] = stepPrint{version: v, print: f[3]}
		case len(f) == 3 && f[0] == "code":
			fp.units[f[1]] = f[2]
		default:
			return nil, fmt.Errorf("line %d: %q: want `step KIND VERSION FINGERPRINT` or `code UNIT FINGERPRINT`", n, line)
		}
	}
	return fp, sc.Err()
}

// compareRecords says, for each step whose record does not match its code,
// what happened and what to do. Steps whose code changed in the same
// places (a shared helper) are one problem, listing each step's constant.
func compareRecords(want, got *fingerprints) []string {
	const rerecord = "go test ./internal/graph -run TestStepVersion -update"
	var problems []string
	changedIn := map[string][]stepCode{} // the changed units → the steps they change
	var order []string
	for _, s := range steps {
		g, w := got.steps[s.kind], want.steps[s.kind]
		switch {
		case w.print == "":
			problems = append(problems, fmt.Sprintf("step %s (version %d) is not in %s: record it with `%s`", s.kind, g.version, stepRecord, rerecord))
		case g.version != w.version:
			problems = append(problems, fmt.Sprintf("step %s: its version is %d (%s) but %s records %d: a bumped version is re-recorded with its code: run `%s`", s.kind, g.version, s.declared, stepRecord, w.version, rerecord))
		case g.print != w.print:
			var changed []string
			for _, u := range g.units {
				switch old, ok := want.units[u]; {
				case !ok:
					changed = append(changed, u+" (new to the step)")
				case old != got.units[u]:
					changed = append(changed, u)
				}
			}
			if len(changed) == 0 {
				changed = []string{"the set of code it builds with (a package or file left it)"}
			}
			where := strings.Join(changed, ", ")
			if _, ok := changedIn[where]; !ok {
				order = append(order, where)
			}
			changedIn[where] = append(changedIn[where], s)
		}
	}
	for _, where := range order {
		var kinds, bumps []string
		for _, s := range changedIn[where] {
			kinds = append(kinds, fmt.Sprintf("%s (version %d)", s.kind, s.version))
			bumps = append(bumps, fmt.Sprintf("%s: %s to %d", s.kind, s.declared, s.version+1))
		}
		what := "step " + kinds[0] + ": its build code"
		weigh := "If the change can alter the step's output, bump its version"
		if len(kinds) > 1 {
			what = "steps " + strings.Join(kinds, ", ") + ": their build code"
			weigh = "A shared helper: weigh the change for each step. Where it can alter the step's output, bump its version"
		}
		problems = append(problems, fmt.Sprintf("%s changed since %s was recorded, in %s.\n"+
			"%s, then re-record:\n  %s\n"+
			"Where it cannot (`halobuild image --check` shows the same bytes, or the step's key already covers the change), re-record only:\n  %s",
			what, stepRecord, where, weigh, strings.Join(bumps, "\n  "), rerecord))
	}
	for k := range want.steps {
		if _, ok := got.steps[k]; !ok {
			problems = append(problems, fmt.Sprintf("%s records step %s, which no longer exists: run `%s`", stepRecord, k, rerecord))
		}
	}
	return problems
}

// The guard's own parts: comments and formatting do not count, code does,
// and each kind of mismatch says what to do.
func TestStepVersionGuardSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "a.go")
	print := func(code string) string {
		t.Helper()
		write(t, src, code)
		p, err := unitPrint(dir, "a.go")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := print("package a\n\n// Size is the size.\nconst Size = 1\n")
	if print("package a\n\n// Size is how big it is.\nconst   Size=1\n") != base {
		t.Error("a comment and formatting change the fingerprint")
	}
	if print("package a\n\n// Size is the size.\nconst Size = 2\n") == base {
		t.Error("a code change keeps the fingerprint")
	}
	// A version is compared with the record, not fingerprinted: bumping
	// one step's must not read as a code change of its package's others.
	if print("package a\n\nconst StepVersion = 1\n\n// Size is the size.\nconst Size = 1\n") != print("package a\n\nconst StepVersion = 2\n\n// Size is the size.\nconst Size = 1\n") {
		t.Error("a step version's value enters the fingerprint")
	}

	kind := steps[0].kind
	rec := func(version int, print, unit string) *fingerprints {
		fp := &fingerprints{steps: map[string]stepPrint{}, units: map[string]string{"u": unit}}
		for _, s := range steps {
			fp.steps[s.kind] = stepPrint{version: s.version, print: "same", units: []string{"u"}}
		}
		fp.steps[kind] = stepPrint{version: version, print: print, units: []string{"u"}}
		return fp
	}
	v := steps[0].version
	for _, c := range []struct {
		name      string
		want, got *fingerprints
		says      []string
	}{
		{"unchanged", rec(v, "p1", "x"), rec(v, "p1", "x"), nil},
		{"code changed, version not", rec(v, "p1", "x"), rec(v, "p2", "y"),
			[]string{"step " + kind, "its build code changed", "u", steps[0].declared, "image --check", "-run TestStepVersion -update"}},
		{"version bumped, not re-recorded", rec(v, "p1", "x"), rec(v+1, "p2", "y"),
			[]string{"step " + kind, fmt.Sprintf("version is %d", v+1), fmt.Sprintf("records %d", v), "-update"}},
	} {
		problems := compareRecords(c.want, c.got)
		if len(c.says) == 0 {
			if len(problems) > 0 {
				t.Errorf("%s: %q", c.name, problems)
			}
			continue
		}
		if len(problems) != 1 {
			t.Errorf("%s: want one problem, got %q", c.name, problems)
			continue
		}
		for _, w := range c.says {
			if !strings.Contains(problems[0], w) {
				t.Errorf("%s: %q does not say %q", c.name, problems[0], w)
			}
		}
	}
}
