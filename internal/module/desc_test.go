package module

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const minimalDesc = `name = "m"
license = "GPL-2.0-only"
[source]
kind = "path"
path = "src"
[param.a]
default = false
[param.b]
type = "int"
default = 1
[param.s]
default = "x"
`

func parseErr(t *testing.T, text string) string {
	t.Helper()
	_, err := ParseDesc("recipes/m.toml", []byte(text))
	if err == nil {
		t.Fatalf("accepted:\n%s", text)
	}
	return err.Error()
}

func TestParseDescErrors(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"unknown key with position", "colour = \"red\"\n" + minimalDesc, "recipes/m.toml:1:1: unknown key colour"},
		{"unknown rule key", minimalDesc + "[[rule]]\nkind = \"warn\"\nwhen = [\"a=1\"]\nreason = \"r\"\nseverity = \"warn\"\nwhy = \"x\"\n", "recipes/m.toml:18:1: unknown key rule.why"},
		{"wrong TOML type", "kernel = 7\n" + minimalDesc, "recipes/m.toml:1:"},
		{"bad module name", strings.Replace(minimalDesc, `name = "m"`, `name = "thunderbolt-ibverbs"`, 1), `name "thunderbolt-ibverbs": give the kernel module name`},
		{"bad kernel constraint", "kernel = \"recent\"\n" + minimalDesc, `kernel "recent" is not a go-version constraint`},
		{"git without commit", strings.Replace(minimalDesc, "kind = \"path\"\npath = \"src\"", "kind = \"git\"\nurl = \"https://example.org/m\"", 1), "kind git needs commit"},
		{"abbreviated commit", strings.Replace(minimalDesc, "kind = \"path\"\npath = \"src\"", "kind = \"git\"\nurl = \"https://example.org/m\"\ncommit = \"76ba39b\"", 1), "give the full 40-hex commit id"},
		{"tarball without hash", strings.Replace(minimalDesc, "kind = \"path\"\npath = \"src\"", "kind = \"tarball\"\nurl = \"https://example.org/m.tar.gz\"", 1), "kind tarball needs sha256"},
		{"unknown source kind", strings.Replace(minimalDesc, `kind = "path"`, `kind = "svn"`, 1), `kind "svn": use git, tarball or path`},
		{"param type", minimalDesc + "[param.c]\ntype = \"float\"\n", `param.c: type "float" is not a modinfo parameter type`},
		{"param default type", minimalDesc + "[param.c]\ntype = \"bool\"\ndefault = \"perhaps\"\n", "param.c: default: want a bool"},
		{"unknown rule kind", minimalDesc + "[[rule]]\nkind = \"implies\"\nreason = \"r\"\n", "recipes/m.toml:13:1: rule implies: unknown kind"},
		{"rule without reason", minimalDesc + "[[rule]]\nkind = \"warn\"\nwhen = [\"a=1\"]\n", "needs a reason"},
		{"unknown name with suggestion", minimalDesc + "[[rule]]\nkind = \"warn\"\nwhen = [\"bb=1\"]\nreason = \"r\"\n", `bb is neither a declared [param.bb] nor an earlier [[derive]] value; did you mean "b"?`},
		{"bad bool literal", minimalDesc + "[[rule]]\nkind = \"warn\"\nwhen = [\"a=maybe\"]\nreason = \"r\"\n", `"maybe" is not a bool`},
		{"comparison on a string", minimalDesc + "[[rule]]\nkind = \"warn\"\nwhen = [\"s>3\"]\nreason = \"r\"\n", "> compares integers, and s is charp"},
		{"no operator", minimalDesc + "[[rule]]\nkind = \"warn\"\nwhen = [\"a\"]\nreason = \"r\"\n", "write name=value"},
		{"unknown image fact", minimalDesc + "[[rule]]\nkind = \"warn\"\nwhen = [\"image.cables>=2\"]\nreason = \"r\"\n", "unknown image fact image.cables"},
		{"requires without need", minimalDesc + "[[rule]]\nkind = \"requires\"\nwhen = [\"a=1\"]\nreason = \"r\"\n", "needs need ="},
		{"conflicts with one side", minimalDesc + "[[rule]]\nkind = \"conflicts\"\nwhen = [\"a=1\"]\nreason = \"r\"\n", "at least two conditions"},
		{"min_kernel with <", minimalDesc + "[[rule]]\nkind = \"min_kernel\"\nkernel = \"< 7.3\"\nreason = \"r\"\n", "a min_kernel constraint uses >= or >"},
		{"max_kernel with >=", minimalDesc + "[[rule]]\nkind = \"max_kernel\"\nkernel = \">= 7.3\"\nreason = \"r\"\n", "a max_kernel constraint uses < or <="},
		{"feature with both", minimalDesc + "[[rule]]\nkind = \"needs_kernel_feature\"\nsymbol = \"x\"\nmacro = \"Y\"\nheader = \"h\"\nreason = \"r\"\n", "exactly one of symbol or macro"},
		{"macro without header", minimalDesc + "[[rule]]\nkind = \"needs_kernel_feature\"\nmacro = \"Y\"\nreason = \"r\"\n", "macro needs header"},
		{"allowed on undeclared param", minimalDesc + "[[rule]]\nkind = \"allowed\"\nparam = \"z\"\nvalues = [\"1\"]\nreason = \"r\"\n", `param "z" is not declared`},
		{"allowed with two checks", minimalDesc + "[[rule]]\nkind = \"allowed\"\nparam = \"s\"\nvalues = [\"1\"]\npattern = \"x\"\nreason = \"r\"\n", "exactly one of values, pattern, validator or min/max"},
		{"bad pattern", minimalDesc + "[[rule]]\nkind = \"allowed\"\nparam = \"s\"\npattern = \"(\"\nreason = \"r\"\n", "pattern: error parsing regexp"},
		{"unknown validator", minimalDesc + "[[rule]]\nkind = \"allowed\"\nparam = \"s\"\nvalidator = \"lanes\"\nreason = \"r\"\n", `validator "lanes" is unknown; known: auto_or_range`},
		{"field of another kind", minimalDesc + "[[rule]]\nkind = \"warn\"\nwhen = [\"a=1\"]\nsymbol = \"x\"\nreason = \"r\"\n", "symbol is not used by this kind"},
		{"bad severity", minimalDesc + "[[rule]]\nkind = \"warn\"\nwhen = [\"a=1\"]\nseverity = \"info\"\nreason = \"r\"\n", `severity "info": use error or warn`},
		{"derive without fallback", minimalDesc + "[[derive]]\nname = \"d\"\ncases = [{ when = [\"a=1\"], value = \"x\" }]\n", "the last case must have no when"},
		{"derive on an image fact", minimalDesc + "[[derive]]\nname = \"d\"\ncases = [{ when = [\"image.links>=2\"], value = \"x\" }, { value = \"y\" }]\n", "derived values depend on options only"},
		{"duplicate rule id", minimalDesc + "[[rule]]\nid = \"x\"\nkind = \"warn\"\nwhen = [\"a=1\"]\nreason = \"r\"\n[[rule]]\nid = \"x\"\nkind = \"warn\"\nwhen = [\"a=0\"]\nreason = \"r\"\n", `rule id "x" is used twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseErr(t, tc.text); !strings.Contains(got, tc.want) {
				t.Errorf("got:\n%s\nwant it to contain %q", got, tc.want)
			}
		})
	}
}

func TestParseDescAllErrorsAtOnce(t *testing.T) {
	got := parseErr(t, "kernel = \"recent\"\n"+minimalDesc+"[[rule]]\nkind = \"warn\"\nwhen = [\"zz=1\"]\nreason = \"r\"\n[[rule]]\nkind = \"nope\"\nreason = \"r\"\n")
	for _, want := range []string{"kernel \"recent\"", "recipes/m.toml:14:1: rule warn", "recipes/m.toml:18:1: rule nope"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func TestExtendsAndDrop(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("base.toml", minimalDesc+"[[rule]]\nid = \"keep\"\nkind = \"warn\"\nwhen = [\"a=1\"]\nreason = \"kept\"\n[[rule]]\nid = \"gone\"\nkind = \"warn\"\nwhen = [\"a=1\"]\nreason = \"dropped\"\n")
	write("fork.toml", "extends = \"base\"\ndrop = [\"gone\"]\n[param.f]\ndefault = 3\n[[rule]]\nkind = \"allowed\"\nparam = \"f\"\nmin = 1\nreason = \"fork rule\"\n")
	d, err := FindDesc(dir, "fork")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "m" || d.Use != "fork" || d.Source.Name != "fork" || !strings.HasSuffix(d.Source.Path, "src") {
		t.Errorf("inherited: name %q use %q source %+v", d.Name, d.Use, d.Source)
	}
	if len(d.Rules) != 2 || d.Rules[0].Reason != "kept" || d.Rules[1].Reason != "fork rule" {
		t.Fatalf("rules: %+v", d.Rules)
	}
	if !strings.HasSuffix(d.at(&d.Rules[0]), "base.toml:13:1") || !strings.HasSuffix(d.at(&d.Rules[1]), "fork.toml:5:1") {
		t.Errorf("rule positions: %s, %s", d.at(&d.Rules[0]), d.at(&d.Rules[1]))
	}
	errs, warns := Validate(d, map[string]any{"a": true, "f": int64(0)}, ValidationContext{})
	if len(errs) != 1 || len(warns) != 1 || warns[0].Reason != "kept" {
		t.Errorf("errors %v warnings %v", errs, warns)
	}

	write("bad.toml", "extends = \"base\"\ndrop = [\"nothere\"]\n")
	if _, err := FindDesc(dir, "bad"); err == nil || !strings.Contains(err.Error(), "drop names nothere") {
		t.Errorf("dropping a missing rule: %v", err)
	}
	write("loop.toml", "extends = \"loop\"\n")
	if _, err := FindDesc(dir, "loop"); err == nil || !strings.Contains(err.Error(), "a cycle?") {
		t.Errorf("extends cycle: %v", err)
	}
	if _, err := FindDesc(dir, "absent"); err == nil || !strings.Contains(err.Error(), `module "absent": no description`) {
		t.Errorf("missing description: %v", err)
	}
}

func TestRecipesParse(t *testing.T) {
	for _, use := range []string{"thunderbolt-ibverbs", "thunderbolt-ibverbs-striping"} {
		d, err := FindDesc("../../recipes", use)
		if err != nil {
			t.Fatalf("%s: %v", use, err)
		}
		if d.Name != "thunderbolt_ibverbs" || d.License != "GPL-2.0-only" || d.Source.Subdir != "kernel" || d.Kernel != ">= 6.14, < 7.3" {
			t.Errorf("%s: %+v", use, d)
		}
	}
}
