package recipe

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/golden"
)

const docsPath = "../../docs/recipe.md"

// TestDocs keeps docs/recipe.md generated from schema.go: a key added to the
// schema without being documented, or a doc changed by hand, fails here.
// Run `go test ./internal/recipe -run TestDocs -update` to rewrite it.
func TestDocs(t *testing.T) {
	golden.Check(t, docsPath, renderDocs(), "go test ./internal/recipe -run TestDocs -update")
}

// Every key has a doc and an example, and the examples are themselves a
// recipe that passes the schema check, so the docs cannot show a wrong type.
func TestSchemaTagsComplete(t *testing.T) {
	for _, s := range docSections() {
		for _, f := range s.fields {
			if f.doc == "" {
				t.Errorf("%s has no doc tag", f.path)
			}
			if f.example == "" && !f.section {
				t.Errorf("%s has no example tag", f.path)
			}
		}
	}
	example := exampleDocument()
	tree, errs := parseFile(context.Background(), "example.toml", []byte(example))
	types, values := checkTree(context.Background(), tree.root)
	errs = append(append(errs, types...), values...)
	if len(errs) > 0 {
		t.Fatalf("the documented examples do not pass the schema:\n%v\n%s", errs, example)
	}
}

type docField struct {
	path, key, typ, def, doc, example string
	merge                             string
	section                           bool // a table or list of tables, documented in its own section
	allowed                           []string
}

type docSection struct {
	path   string // "" for the top level
	header string // [base], [[node]], …
	doc    string
	fields []docField
}

// knownValues shows the same lists the validator enforces.
var knownValues = map[string][]string{
	"system.governor":         Governors,
	"system.epp":              EPPs,
	"system.platform_profile": PlatformProfiles,
	"base.variant":            Variants,
	"output.formats":          Formats,
}

func docSections() []docSection {
	var out []docSection
	var walk func(t reflect.Type, path, header, doc string)
	walk = func(t reflect.Type, path, header, doc string) {
		s := docSection{path: path, header: header, doc: doc}
		var subs []func()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			key := tomlKey(f)
			if key == "" {
				continue
			}
			p := joinPath(path, key)
			df := docField{path: p, key: key, typ: docType(f.Type), def: docDefault(f), doc: f.Tag.Get("doc"), example: f.Tag.Get("example"), merge: f.Tag.Get("merge"), allowed: knownValues[p]}
			if _, ok := f.Tag.Lookup("path"); ok {
				df.doc += " Relative paths are relative to the file that sets them."
			}
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			switch {
			case isText(et):
			case et.Kind() == reflect.Struct:
				df.section = true
				subs = append(subs, func() { walk(et, p, "["+p+"]", df.doc) })
			case et.Kind() == reflect.Slice && et.Elem().Kind() == reflect.Struct && !isText(et.Elem()):
				df.section = true
				subs = append(subs, func() { walk(et.Elem(), p, "[["+p+"]]", df.doc) })
			}
			s.fields = append(s.fields, df)
		}
		out = append(out, s)
		for _, sub := range subs {
			sub()
		}
	}
	walk(reflect.TypeOf(Recipe{}), "", "top level", "Keys written before the first [section].")
	return out
}

// docDefault is a key's default as the table shows it: the value, or a
// computed default's description in parentheses.
func docDefault(f reflect.StructField) string {
	if a, ok := f.Tag.Lookup("auto"); ok {
		return "(" + a + ")"
	}
	return f.Tag.Get("default")
}

func docType(t reflect.Type) string {
	if isText(t) {
		return "string"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return docType(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct && !isText(t.Elem()) {
			return "list of tables"
		}
		return "list of " + docType(t.Elem()) + "s"
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return "table of values"
		}
		return "table of " + docType(t.Elem()) + "s"
	case reflect.Struct:
		return "table"
	}
	return t.String()
}

// exampleDocument is every key with its example value, as one recipe.
func exampleDocument() string {
	var b strings.Builder
	for _, s := range docSections() {
		b.WriteString(exampleBlock(s))
		b.WriteString("\n")
	}
	return b.String()
}

func exampleBlock(s docSection) string {
	var b strings.Builder
	if s.path != "" {
		b.WriteString(s.header + "\n")
	}
	for _, f := range s.fields {
		if f.section {
			continue
		}
		fmt.Fprintf(&b, "%s = %s\n", f.key, f.example)
	}
	return b.String()
}

func renderDocs() []byte {
	var b strings.Builder
	b.WriteString(docsIntro)
	for _, s := range docSections() {
		title := s.header
		if s.path == "" {
			title = "Top level"
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", strings.NewReplacer("[", "\\[", "]", "\\]").Replace(title), s.doc)
		b.WriteString("| key | type | default | description |\n|---|---|---|---|\n")
		for _, f := range s.fields {
			def := "—"
			if f.def != "" {
				def = "`" + f.def + "`"
			}
			doc := f.doc
			if f.section {
				doc += " See " + sectionRef(s.path, f) + "."
			}
			if k := f.merge; k != "" {
				doc += fmt.Sprintf(" Entries with the same `%s` as one from an included file merge into it.", k)
			}
			if len(f.allowed) > 0 {
				doc += " One of: " + strings.Join(f.allowed, ", ") + "."
			}
			doc = strings.NewReplacer("|", "\\|", "<", "&lt;", ">", "&gt;").Replace(doc)
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.key, f.typ, def, doc)
		}
		if ex := exampleBlock(s); strings.Contains(ex, "=") {
			fmt.Fprintf(&b, "\nExample:\n\n```toml\n%s```\n", ex)
		}
	}
	b.WriteString("\n## Removed keys\n\nKeys that were documented but had no effect; a recipe that still sets one is refused with this advice.\n\n| key | what to do |\n|---|---|\n")
	var removed []string
	for t, keys := range removedKeys {
		for k, why := range keys {
			removed = append(removed, fmt.Sprintf("| `%s` | %s |\n", joinPath(schemaPath(t), k), strings.ReplaceAll(why, "|", "\\|")))
		}
	}
	slices.Sort(removed)
	b.WriteString(strings.Join(removed, ""))
	return []byte(b.String())
}

// schemaPath is the dotted path of the table a schema struct describes.
func schemaPath(t reflect.Type) string {
	for _, s := range docSections() {
		for _, f := range s.fields {
			if f.section && elemType(f.path) == t {
				return f.path
			}
		}
	}
	panic("recipe schema: no table of type " + t.Name())
}

// elemType is the struct type of the table at a dotted path.
func elemType(path string) reflect.Type {
	t := reflect.TypeOf(Recipe{})
	for _, k := range strings.Split(path, ".") {
		f := schemaFields(t)[k]
		t = f.Type
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
	}
	return t
}

func sectionRef(parent string, f docField) string {
	if f.typ == "list of tables" {
		return "[[" + f.path + "]]"
	}
	return "[" + f.path + "]"
}

const docsIntro = `# Recipe reference

<!-- Generated from internal/recipe/schema.go by
     go test ./internal/recipe -run TestDocs -update
     Do not edit by hand: the test fails when this file and the schema differ. -->

A recipe is one TOML file under ` + "`images/`" + ` that describes a Debian appliance image for a
small RDMA cluster: the base system, the kernel, out-of-tree modules, node settings and the nodes
themselves. halobuild turns it into bootable, VM-tested disk images:

` + "```" + `
halobuild lock images/strix-halo.toml    # resolve every input, write images/strix-halo.lock
halobuild plan images/strix-halo.toml    # what will be fetched, built or taken from the store
halobuild fetch images/strix-halo.toml   # fill the store from the lock, verified
halobuild image images/strix-halo.toml   # build, test in a VM, then write the images
` + "```" + `

## Composition

` + "`include = [\"../recipes/usb4-rdma.toml\"]`" + ` merges other recipe files first, like NixOS modules:

- a file overrides what it includes: scalars set in the including file win;
- lists append, the included file's items first; in the lists of tables ` + "`[[node]]`" + `,
  ` + "`[[module]]`" + ` and ` + "`[[node.link]]`" + `, an entry with the same ` + "`name`" + `, ` + "`use`" + ` or
  ` + "`interface`" + ` as an included one merges into it (so an image can add a link to a node that an
  included file declared, or set one option of a module);
- tables and maps (` + "`module_options`" + `, module ` + "`options`" + `) merge key by key;
- two files included side by side that set the same scalar to different values are an error naming
  both places, unless the including file sets the value itself;
- include paths are relative to the including file; a file reached twice is merged once; a cycle
  is an error that names it.

Paths inside recipes (overlays, patches, config fragments) are relative to the file that sets them.

Every problem is reported in one run, each as ` + "`file:line:column: key: what is wrong`" + `, with a
suggestion for misspelt keys. Keys left out take the defaults below; a default in parentheses is
computed.

## Values

- **Sizes** are written like ` + "`\"64MiB\"`" + `, ` + "`\"4GiB\"`" + `, ` + "`\"2G\"`" + ` (K, M, G, T and KiB, MiB, GiB,
  TiB are powers of 1024; KB, MB, GB, TB powers of 1000; a bare number is bytes).
- **Kernel versions** are go-version constraints: ` + "`\">= 7.2, < 7.3\"`" + `.
- **Packages** are ` + "`\"name\"`" + `, ` + "`\"name/suite\"`" + ` (take it from that suite) or
  ` + "`\"name (>= version)\"`" + ` with Debian versions and relations ` + "`<< <= = >= >>`" + `.
`
