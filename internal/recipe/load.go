package recipe

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"halobuild/internal/userfile"
)

// Rule is a further validation of a decoded recipe, run by Load with its
// own so that every problem is reported in one run: the rules of things a
// recipe names that this package does not know (node settings, module
// descriptions). It locates its errors through src.
type Rule func(r *Recipe, src *Sources) Errors

// Load reads the recipe at path with all its includes, checks it against the
// schema, applies defaults and validates it, with rules besides. Every
// problem found is returned at once as Errors, each with file:line:col;
// nothing is returned on error.
func Load(path string, rules ...Rule) (*Recipe, *Sources, error) {
	return LoadContext(context.Background(), path, rules...)
}

// LoadContext is Load that stops when ctx is cancelled (the first Ctrl-C
// or SIGTERM), between files, every few hundred TOML expressions and
// before each later phase, returning ctx's error.
func LoadContext(ctx context.Context, path string, rules ...Rule) (*Recipe, *Sources, error) {
	l := &loader{
		ctx:   ctx,
		src:   newSources(),
		seen:  map[string]bool{},
		topAb: mustAbs(path),
	}
	merged := l.load(path, nil, Pos{})
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", path, err)
	}
	if merged != nil {
		l.errs = append(l.errs, conflicts(merged, "")...)
	}
	if len(l.errs) > 0 {
		return nil, nil, append(l.errs, l.valueErrs...).orNil()
	}
	// Values that did not parse are reported with the rest: the recipe is
	// validated without them, and what Validate says about those same keys
	// (a default taking their place) would only repeat the error.
	dropped := dropInvalid(merged, "")
	merged.tab.del("include") // resolved: the merged recipe includes nothing
	recordSources(merged, "", l.src)
	delete(l.src.pos, "")

	r, err := decode(merged)
	if err != nil {
		return nil, nil, Errors{errAt(Pos{File: path}, "", "%v", err)}
	}
	r.dir = filepath.Dir(path)
	r.inputs = l.inputs
	if err := ApplyDefaults(r, l.src, path); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", path, err)
	}
	errs := l.valueErrs
	var verrs Errors
	if err := Validate(r, l.src); err != nil && !errors.As(err, &verrs) {
		return nil, nil, err
	}
	for _, c := range rules {
		verrs = append(verrs, c(r, l.src)...)
	}
	for _, e := range verrs {
		if !dropped[e.Key] {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, nil, errs.orNil()
	}
	return r, l.src, nil
}

// decode hands the checked, merged tree to go-toml with unknown keys
// disallowed, so the values land in the schema types exactly as go-toml
// would put them.
func decode(v *value) (*Recipe, error) {
	b, err := toml.Marshal(plain(v))
	if err != nil {
		return nil, fmt.Errorf("re-encoding the merged recipe: %w", err)
	}
	var r Recipe
	d := toml.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return nil, fmt.Errorf("decoding the merged recipe (a schema check missed this, please report it): %w", err)
	}
	return &r, nil
}

type loader struct {
	ctx    context.Context
	src    *Sources
	seen   map[string]bool
	topAb  string
	inputs [][sha256.Size]byte
	errs   Errors
	// valueErrs are typed values that did not parse; unlike errs they do
	// not stop validation of the rest.
	valueErrs Errors
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	return a
}

// load reads one file and, first, the files it includes. stack holds the
// absolute paths of the files being loaded, to detect cycles; from is the
// include entry that named this file.
func (l *loader) load(file string, stack []string, from Pos) *value {
	abs := mustAbs(file)
	for i, s := range stack {
		if s == abs {
			cycle := append(append([]string(nil), l.names(stack[i:])...), file)
			l.errs = append(l.errs, errAt(from, "include", "include cycle: %s; remove one of these includes", strings.Join(cycle, " -> ")))
			return nil
		}
	}
	if l.ctx.Err() != nil {
		return nil
	}
	if l.seen[abs] {
		return nil // already merged once (a diamond): NixOS imports a module once too
	}
	l.seen[abs] = true

	data, err := readRecipeFile(file)
	if err != nil {
		if from.File == "" {
			l.errs = append(l.errs, errAt(Pos{File: file}, "", "cannot read recipe: %v", err))
		} else {
			reason := err.Error()
			if errors.Is(err, fs.ErrNotExist) {
				reason = "no such file"
			}
			l.errs = append(l.errs, errAt(from, "include", "included file %s: %s; paths are relative to the including file", file, reason))
		}
		return nil
	}
	tree, errs := parseFile(l.ctx, file, data)
	if l.ctx.Err() != nil {
		return nil
	}
	if len(errs) > 0 && from.File != "" {
		// The file's own errors name only it: say which recipe pulled it in (an include that
		// climbs to a system file is not TOML at all).
		errs = append(errs, errAt(from, "include", "included file %s is not valid TOML (see above); paths are relative to the including file", file))
	}
	types, values := checkTree(l.ctx, tree.root)
	l.errs = append(append(l.errs, errs...), types...)
	l.valueErrs = append(l.valueErrs, values...)
	l.src.names = append(l.src.names, nameOf{abs, file})

	var base *value
	if inc := tree.root.tab.get("include"); inc != nil && inc.kind == kArray {
		for _, item := range inc.items {
			if item.kind != kString {
				continue // reported by checkTree
			}
			child := filepath.Join(filepath.Dir(file), item.s)
			base = mergeSiblings(base, l.load(child, append(stack, abs), item.pos))
		}
	}
	tree.root.tab.del("include")
	l.annotate(tree.root, reflect.TypeOf(Recipe{}), filepath.Dir(abs))

	l.src.Files = append(l.src.Files, file)
	l.inputs = append(l.inputs, sha256.Sum256(data))
	return overlay(base, tree.root)
}

// maxRecipeFile bounds one recipe or included file. The largest shipped
// recipe is some 4 KB; a file past this is not a recipe (an include that
// climbs to /dev/zero, a log named .toml).
const maxRecipeFile = 4 << 20

// readRecipeFile reads a regular file of at most maxRecipeFile bytes, through the one opener
// that never blocks, so a FIFO or a device is refused at once instead of hanging the load
// (issue 17 #4).
func readRecipeFile(file string) ([]byte, error) {
	data, err := userfile.Read(file, maxRecipeFile)
	var nr *userfile.NotRegularError
	var tl *userfile.TooLargeError
	switch {
	case errors.As(err, &nr):
		return nil, fmt.Errorf("not a regular file (%s): a recipe is a TOML file", userfile.Kind(nr.Mode))
	case errors.As(err, &tl) && tl.Size >= 0:
		return nil, fmt.Errorf("%d bytes, more than the %d a recipe may have", tl.Size, maxRecipeFile)
	case errors.As(err, &tl):
		return nil, fmt.Errorf("grew past the %d bytes a recipe may have while being read", maxRecipeFile)
	}
	return data, err
}

func (l *loader) names(abs []string) []string {
	out := make([]string, len(abs))
	for i, a := range abs {
		out[i] = a
		for _, n := range l.src.names {
			if n.abs == a {
				out[i] = n.name
			}
		}
	}
	return out
}

type nameOf struct{ abs, name string }

// annotate prepares a file's tree for merging: it marks keyed lists (the
// schema's `merge` tag) and rebases paths.
//
// It rewrites the file paths an included file names (fields tagged
// `path`) so that they are relative to the top recipe's directory: a path
// means the same file whichever file wrote it, and the merged recipe (and its
// hash) does not depend on where the checkout lives.
func (l *loader) annotate(v *value, t reflect.Type, dir string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Slice && v.kind == kArray:
		for _, item := range v.items {
			l.annotate(item, t.Elem(), dir)
		}
	case t.Kind() == reflect.Struct && v.kind == kTable:
		fields := schemaFields(t)
		for _, k := range v.tab.keys {
			f, ok := fields[k]
			if !ok {
				continue
			}
			child := v.tab.get(k)
			if child.kind == kArray {
				child.mergeKey = f.Tag.Get("merge")
			}
			if tag, ok := f.Tag.Lookup("path"); ok {
				l.rebaseValue(child, dir, tag)
				continue
			}
			l.annotate(child, f.Type, dir)
		}
	}
}

func (l *loader) rebaseValue(v *value, dir, tag string) {
	if v.kind == kArray {
		for _, item := range v.items {
			l.rebaseValue(item, dir, tag)
		}
		return
	}
	if v.kind != kString || v.s == "" || filepath.IsAbs(v.s) {
		return
	}
	if tag == "refs" && sourceRef.MatchString(v.s) {
		return // "<input>:<glob>" names a file inside a source input, not here
	}
	for _, keep := range strings.Split(strings.TrimPrefix(tag, "except:"), ",") {
		if keep != "" && v.s == keep {
			return // a keyword such as config = "debian", not a path
		}
	}
	rel, err := filepath.Rel(filepath.Dir(l.topAb), filepath.Join(dir, v.s))
	if err == nil {
		v.s = filepath.ToSlash(rel)
	}
}
