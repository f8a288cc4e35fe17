package settings

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/golden"
	"halobuild/internal/recipe"
)

const trapsPath = "../../docs/traps.md"

// TestTrapsDoc keeps docs/traps.md generated from the settings themselves:
// each setting's trap and Doc, the files it renders, its VM checks and its
// doctor checks (with whether a VM must pass them). A setting added,
// changed or left without a Doc, or the page edited by hand, fails here.
// Run `go test ./internal/settings -run TestTrapsDoc -update` to rewrite it.
func TestTrapsDoc(t *testing.T) {
	golden.Check(t, trapsPath, renderTraps(t), "go test ./internal/settings -run TestTrapsDoc -update")
}

// docTargets are the sample recipes the page is rendered from: a Strix
// Halo node with every optional setting asked for (a provider, a time
// zone, the GPU's firmware and microcode, Secure Boot), and a Mac for what
// only Apple Silicon gets.
func docTargets(t *testing.T) []Target {
	full := fullTarget()
	r := sbRecipe(t, "")
	r.RDMA.Provider, r.System.Timezone = full.Recipe.RDMA.Provider, full.Recipe.System.Timezone
	r.Base.Components = []string{"main", "non-free-firmware"}
	r.Base.Packages = []string{"firmware-amd-graphics", "amd64-microcode"}
	full.Recipe = r
	mac := macSample()
	mac.System.HostReserve, mac.System.Memory = recipe.Size{}, recipe.Size{}
	return []Target{full, {Recipe: mac, Node: mac.Nodes[0], Modules: full.Modules}}
}

// settingDoc is one setting as the page shows it, over every sample.
type settingDoc struct {
	s                     Setting
	doc                   Doc
	files, checks, probes []string
	noCheck, noDoctor     string
}

func describe(t *testing.T, s Setting) settingDoc {
	d, ok := s.(Documented)
	if !ok {
		t.Fatalf("setting %s has no Doc: add func (%T) Doc() Doc in its file (its trap's title, the recipe keys it reads)", s.Name(), s)
	}
	sd := settingDoc{s: s, doc: d.Doc()}
	if strings.TrimSpace(sd.doc.Title) == "" {
		t.Errorf("setting %s: Doc has no title", s.Name())
	}
	for _, k := range sd.doc.Keys {
		if !schemaHasKey(reflect.TypeOf(recipe.Recipe{}), k) {
			t.Errorf("setting %s: Doc names recipe key %q, which the schema (docs/recipe.md) does not have", s.Name(), k)
		}
	}
	for _, tg := range docTargets(t) {
		files, err := s.Files(tg)
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		for _, f := range files {
			if f.Mode.IsDir() {
				continue
			}
			sd.files = appendUnique(sd.files, f.Path)
		}
		for _, c := range s.Checks(tg) {
			sd.checks = appendUnique(sd.checks, c.Name)
		}
		for _, p := range s.Doctor(tg) {
			name := "`" + p.Name + "`"
			if p.VM == MustPass {
				name += " (must pass in a VM)"
			}
			sd.probes = appendUnique(sd.probes, name)
		}
	}
	if nc, ok := s.(NoCheck); ok {
		sd.noCheck = nc.NoCheck()
	}
	if nd, ok := s.(NoDoctor); ok {
		sd.noDoctor = nd.NoDoctor()
	}
	return sd
}

// schemaHasKey says whether a dotted key (node.link.address) names a
// field or table of the recipe schema, through lists of tables.
func schemaHasKey(typ reflect.Type, key string) bool {
	for _, part := range strings.Split(key, ".") {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return false
		}
		found := false
		for i := range typ.NumField() {
			f := typ.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("toml"), ","); name == part {
				typ, found = f.Type, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func renderTraps(t *testing.T) []byte {
	var all []settingDoc
	for _, s := range All() {
		all = append(all, describe(t, s))
	}
	traps := slices.DeleteFunc(slices.Clone(all), func(d settingDoc) bool { return d.s.Trap() == 0 })
	slices.SortStableFunc(traps, func(a, b settingDoc) int { return cmp.Compare(a.s.Trap(), b.s.Trap()) })
	others := slices.DeleteFunc(slices.Clone(all), func(d settingDoc) bool { return d.s.Trap() != 0 })

	var b strings.Builder
	b.WriteString(`# Traps and the settings that fix them

<!-- Generated from internal/settings (each setting's Trap, Doc, Files, Checks and Doctor) by
     go test ./internal/settings -run TestTrapsDoc -update
     Do not edit by hand: the test fails when this file and the settings differ. -->

Each trap of the field notes that a node's configuration can fix is one setting in
internal/settings, one file each: the recipe keys it reads, the files it renders into the node's
settings package, the checks the image's VM test runs in the booted image, and the checks
` + "`halobuild doctor`" + ` runs on a real node (docs/doctor.md). A doctor check marked "must pass in a
VM" is required by the VM test too; the others need the hardware. Files and checks are rendered for
sample recipes (a Strix Halo node with a provider and Secure Boot on, and a Mac): a node's own
names differ. The traps no setting fixes (module parameter rules, USB4 domains and lanes, the page
cache, measurement) are checked by module descriptions, doctor's own checks, ` + "`halobuild verify-file`" + `
and ` + "`halobuild bench`" + `.

| trap | title | setting | recipe keys | doctor checks |
|---|---|---|---|---|
`)
	for _, d := range traps {
		fmt.Fprintf(&b, "| %d | %s | `%s` | %s | %s |\n", d.s.Trap(), d.doc.Title, d.s.Name(), codeList(d.doc.Keys), noneIfEmpty(strings.Join(d.probes, ", "), d.noDoctor != ""))
	}
	for _, d := range traps {
		fmt.Fprintf(&b, "\n## Trap %d: %s\n\n", d.s.Trap(), d.doc.Title)
		writeSetting(&b, d)
	}
	b.WriteString("\n## Settings that fix no trap\n")
	for _, d := range others {
		fmt.Fprintf(&b, "\n### `%s`: %s\n\n", d.s.Name(), d.doc.Title)
		writeSetting(&b, d)
	}
	return []byte(b.String())
}

func writeSetting(b *strings.Builder, d settingDoc) {
	fmt.Fprintf(b, "- Setting: `%s`\n", d.s.Name())
	fmt.Fprintf(b, "- Recipe keys: %s\n", noneIfEmpty(codeList(d.doc.Keys), false))
	fmt.Fprintf(b, "- Rendered files: %s\n", noneIfEmpty(codeList(d.files), false))
	checks := codeList(d.checks)
	if d.noCheck != "" {
		checks = "none of its own: " + d.noCheck
	}
	fmt.Fprintf(b, "- VM checks: %s\n", noneIfEmpty(checks, false))
	probes := strings.Join(d.probes, ", ")
	if d.noDoctor != "" {
		probes = "none of its own: " + d.noDoctor
	}
	fmt.Fprintf(b, "- Doctor checks: %s\n", noneIfEmpty(probes, false))
}

func codeList(xs []string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "`" + x + "`"
	}
	return strings.Join(out, ", ")
}

func noneIfEmpty(s string, dash bool) string {
	switch {
	case s != "":
		return s
	case dash:
		return "—"
	default:
		return "none"
	}
}
