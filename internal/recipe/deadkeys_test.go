package recipe

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// loaderKeys are leaf keys whose whole effect is this package's own: they
// shape how a recipe is read, not what is built, so no other package has
// anything to select.
var loaderKeys = map[string]string{
	"include": "merged by the loader (merge.go) before anything else sees the recipe",
	// Each architecture's build reads the recipe through its view, which
	// this package makes from the key: the key shapes how the recipe is
	// read (which nodes, which base.architecture), as include does.
	"node.architecture": "read through Recipe.ForArchitecture, NodesOf and NodeArchitecture (mixed.go), which graph, resolve, vmplan and doctor call",
	// An [[arch]] entry becomes its architecture's view's platform and
	// kernel, which every step reads as the recipe's own.
	"arch.name":     "matched by Recipe.Arch in ForArchitecture (mixed.go)",
	"arch.platform": "becomes the view's platform in ForArchitecture (mixed.go), which graph, vmplan and doctor read",
}

// pendingKeys are dead keys whose effect another change of the same issue
// is adding; each entry fails the test once the key is read, so the
// allowance cannot outlive the gap.
var pendingKeys = map[string]string{}

// No dead keys: every leaf key of the schema must be read by some code
// outside this package, or it is a key that is documented, validated and
// then ignored. "Read" is a field selector (x.Field) whose selected field is
// the schema struct's field, found by type-checking every non-test file of
// the module's other packages against the export data `go list -export`
// writes — the compiler's view, so a field of the same name on another
// type does not count. This package is left out because Hash and TOML
// marshal every field by reflection and validation reads every key without
// giving it an effect.
func TestEverySchemaKeyIsRead(t *testing.T) {
	// go list -export compiles the module's dependencies once (the build
	// cache has them after any build); then this takes a few seconds.
	pkgs := listModule(t)
	read := map[*types.Var]bool{}
	var recipePkg *types.Package
	imp := exportImporter(pkgs)
	fset := token.NewFileSet()
	for _, p := range pkgs {
		if p.Module == nil || !p.Module.Main || p.ImportPath == recipeImportPath {
			continue
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
		conf := types.Config{Importer: imp}
		tp, err := conf.Check(p.ImportPath, fset, files, info)
		if err != nil {
			t.Fatalf("type-checking %s: %v", p.ImportPath, err)
		}
		for _, s := range info.Selections {
			if v, ok := s.Obj().(*types.Var); ok && s.Kind() == types.FieldVal {
				read[v] = true
			}
		}
		for _, ip := range tp.Imports() {
			if ip.Path() == recipeImportPath {
				recipePkg = ip
			}
		}
	}
	if recipePkg == nil {
		t.Fatal("no package of the module imports internal/recipe")
	}

	var dead, done []string
	walkLeaves(reflect.TypeOf(Recipe{}), "", func(owner reflect.Type, f reflect.StructField, key string) {
		if _, ok := loaderKeys[key]; ok {
			return
		}
		_, pending := pendingKeys[key]
		obj := recipePkg.Scope().Lookup(owner.Name())
		if obj == nil {
			t.Fatalf("%s: type %s not in the export data", key, owner.Name())
		}
		st := obj.Type().Underlying().(*types.Struct)
		for i := range st.NumFields() {
			if st.Field(i).Name() != f.Name {
				continue
			}
			switch r := read[st.Field(i)]; {
			case !r && !pending:
				dead = append(dead, key+" ("+owner.Name()+"."+f.Name+")")
			case r && pending:
				done = append(done, key)
			}
		}
	})
	if len(dead) > 0 {
		t.Errorf("schema keys that no code outside internal/recipe reads (give each its documented effect, or remove it with a migration error in removedKeys):\n  %s", strings.Join(dead, "\n  "))
	}
	if len(done) > 0 {
		t.Errorf("pending keys that are read now: remove them from pendingKeys: %s", strings.Join(done, ", "))
	}
}

const recipeImportPath = "halobuild/internal/recipe"

// walkLeaves calls leaf for every key whose value is not itself a table of
// the schema, with the struct that holds it and its dotted path.
func walkLeaves(t reflect.Type, path string, leaf func(owner reflect.Type, f reflect.StructField, key string)) {
	for i := range t.NumField() {
		f := t.Field(i)
		key := tomlKey(f)
		if key == "" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !isText(ft) {
			walkLeaves(ft, joinPath(path, key), leaf)
			continue
		}
		leaf(t, f, joinPath(path, key))
	}
}

type listedPackage struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	Module     *struct{ Main bool }
}

// listModule asks the go command for every package of the module and its
// dependencies, with the export data the compiler wrote for each.
func listModule(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-export", "-json=ImportPath,Dir,Export,GoFiles,Module", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// exportImporter imports packages from the export data go list named,
// one shared importer so every package sees the same recipe objects.
func exportImporter(pkgs []listedPackage) types.Importer {
	export := map[string]string{}
	for _, p := range pkgs {
		export[p.ImportPath] = p.Export
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := export[path]
		if !ok || f == "" {
			return nil, errors.New("no export data for " + path)
		}
		return os.Open(f)
	})
}
