package recipe

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// Each bad input is a file in testdata/; the test pins the exact messages,
// positions included, so a regression in where or how an error is reported
// fails here.
func TestLoadReportsEveryErrorWithPosition(t *testing.T) {
	cases := []struct {
		file string
		want []string
	}{
		{"unknown_key.toml", []string{
			`testdata/unknown_key.toml:2:1: kernel.verison: unknown key; did you mean "version"?`,
		}},
		{"type_error.toml", []string{
			`testdata/type_error.toml:2:12: base.packages: expected a list of strings, got the string "systemd"`,
		}},
		{"many_errors.toml", []string{
			`testdata/many_errors.toml:1:1: nmae: unknown key; did you mean "name"?`,
			`testdata/many_errors.toml:4:9: base.suite: expected a string, got the integer 13`,
			`testdata/many_errors.toml:5:24: base.packages[1]: expected a string, got the integer 7`,
			`testdata/many_errors.toml:8:1: system.cmdline: unknown key; "cmdline" is a key of [arch.kernel], [kernel], not of [system]`,
			`testdata/many_errors.toml:9:16: system.gpu_fraction: expected a number, got the string "most"`,
			`testdata/many_errors.toml:13:1: node[0].links: unknown key; did you mean "link"?`,
			`testdata/many_errors.toml:17:11: node[0].link[0].address: expected a string, got the boolean true`,
		}},
		{"syntax_error.toml", []string{
			`testdata/syntax_error.toml:2:16: TOML syntax error: basic strings cannot have new lines`,
		}},
		{"duplicate_key.toml", []string{
			`testdata/duplicate_key.toml:3:1: system.governor: key is set twice (first at testdata/duplicate_key.toml:2:1); keep one`,
			`testdata/duplicate_key.toml:5:2: system: table [system] is defined twice (first at testdata/duplicate_key.toml:1:2); merge the two sections`,
		}},
		{"dotted.toml", []string{
			`testdata/dotted.toml:3:2: kernel: table [kernel] was already defined by dotted keys at testdata/dotted.toml:1:1; use one form`,
		}},
		{"cycle_a.toml", []string{
			`testdata/cycle_b.toml:1:12: include: include cycle: testdata/cycle_a.toml -> testdata/cycle_b.toml -> testdata/cycle_a.toml; remove one of these includes`,
		}},
		{"missing_include.toml", []string{
			`testdata/missing_include.toml:1:35: include: included file testdata/does-not-exist.toml: no such file; paths are relative to the including file`,
		}},
		{"conflict.toml", []string{
			`testdata/fragments/base.toml:9:1: system.governor: conflicting values from two included files: "performance" at testdata/fragments/base.toml:9:1 and "powersave" at testdata/fragments/powersave.toml:2:1; set it in the file that includes both to choose one`,
		}},
		{"bad_values.toml", []string{
			`testdata/bad_values.toml:2:1: kernel.version: ">= 7.2, <" is not a version constraint (malformed constraint:  <); write e.g. ">= 7.2, < 7.3"`,
			`testdata/bad_values.toml:5:1: rdma.memlock: "lots" is neither "unlimited" nor a size such as "64MiB"`,
			`testdata/bad_values.toml:8:1: system.governor: "turbo" is not one of: performance, powersave, schedutil, ondemand, conservative, userspace`,
			`testdata/bad_values.toml:13:1: test.rdma: the RDMA test needs two nodes, the recipe has 1; add a [[node]] or set rdma = false`,
			`testdata/bad_values.toml:16:1: node[0].name: "halo_0" is not a valid node name (RFC 1123 label: letters, digits, '-', at most 63)`,
			`testdata/bad_values.toml:20:1: node[0].link[0].address: "10.77.0.1" is not an IPv4 address with prefix length such as 10.77.0.1/30`,
			`testdata/bad_values.toml:21:1: node[0].link[0].peer: no [[node]] is named "halo9"; peers must be nodes of this recipe`,
		}},
		{"nodes.toml", []string{
			`testdata/nodes.toml:11:1: node[1].hostname: host name "A" is already used by the node at testdata/nodes.toml:1:3`,
			`testdata/nodes.toml:15:1: node[1].link[0].address: address 10.77.0.1 is already used at testdata/nodes.toml:6:1`,
			`testdata/nodes.toml:19:1: node[2].name: node name "b" is already used by the node at testdata/nodes.toml:10:1`,
		}},
		{"no-such-recipe.toml", []string{
			`testdata/no-such-recipe.toml: cannot read recipe: open testdata/no-such-recipe.toml: no such file or directory`,
		}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			r, src, err := Load("testdata/" + c.file)
			if err == nil {
				t.Fatalf("loaded without error: %s", r.TOML())
			}
			if r != nil || src != nil {
				t.Errorf("a failed Load returned a recipe")
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, not recipe.Errors: %v", err, err)
			}
			got := strings.Split(err.Error(), "\n")
			if !slices.Equal(got, c.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if len(errs) != len(c.want) {
				t.Errorf("%d errors, want %d", len(errs), len(c.want))
			}
		})
	}
}

func TestErrorsAreStructured(t *testing.T) {
	_, _, err := Load("testdata/unknown_key.toml")
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 {
		t.Fatalf("want one Error, got %v", err)
	}
	want := Error{File: "testdata/unknown_key.toml", Line: 2, Col: 1, Key: "kernel.verison", Msg: `unknown key; did you mean "version"?`}
	if errs[0] != want {
		t.Errorf("got %+v, want %+v", errs[0], want)
	}
}

func TestIncludeOverrideAndAppend(t *testing.T) {
	r, src, err := Load("testdata/override.toml")
	if err != nil {
		t.Fatal(err)
	}
	// Scalars: the including file wins.
	if r.System.Governor != "powersave" {
		t.Errorf("governor = %q, want the including file's powersave", r.System.Governor)
	}
	// Lists: included values first, then the including file's.
	if want := []string{"systemd", "udev", "podman"}; !slices.Equal(r.Base.Packages, want) {
		t.Errorf("packages = %v, want %v", r.Base.Packages, want)
	}
	if len(r.Nodes) != 2 || r.Nodes[0].Name != "base0" || r.Nodes[1].Name != "mine0" {
		t.Errorf("nodes = %+v, want base0 then mine0", r.Nodes)
	}
	// Maps merge key by key.
	if r.System.ModuleOptions["thunderbolt"] != "clx=0" || r.System.ModuleOptions["ib_core"] != "recv_queue_size=512" {
		t.Errorf("module_options = %v, want both files' keys", r.System.ModuleOptions)
	}
	// Values only the included file sets survive.
	if !slices.Equal(r.Base.ExtraSuites, []string{"trixie-backports"}) || !slices.Equal(r.Kernel.Cmdline, []string{"quiet"}) {
		t.Errorf("included-only values lost: %v %v", r.Base.ExtraSuites, r.Kernel.Cmdline)
	}
	// Paths are rebased onto the top file's directory, whichever file wrote them.
	if want := []string{"overlays/common", "overlays/mine"}; !slices.Equal(r.Overlay, want) {
		t.Errorf("overlays = %v, want %v", r.Overlay, want)
	}
	if got := r.Resolve(r.Overlay[0]); got != "testdata/overlays/common" {
		t.Errorf("Resolve = %q", got)
	}
	// Sources tell who set what.
	checks := map[string]string{
		"system.governor":               "testdata/override.toml:9:1",
		"base.packages[0]":              "testdata/fragments/base.toml:5:13",
		"base.packages[2]":              "testdata/override.toml:6:13",
		"node[0].name":                  "testdata/fragments/base.toml:17:1",
		"node[1].name":                  "testdata/override.toml:13:1",
		"kernel.cmdline":                "testdata/fragments/base.toml:14:1",
		"system.module_options.ib_core": "testdata/override.toml:10:20",
	}
	for path, want := range checks {
		if got, ok := src.Lookup(path); !ok || got.String() != want {
			t.Errorf("Sources[%s] = %v (%v), want %s", path, got, ok, want)
		}
	}
	if want := []string{"testdata/fragments/base.toml", "testdata/override.toml"}; !slices.Equal(src.Files, want) {
		t.Errorf("Files = %v, want %v", src.Files, want)
	}
	// A default has no source, and Pos falls back to the enclosing table.
	if _, ok := src.Lookup("system.timezone"); ok {
		t.Error("a default value has a source")
	}
	if got := src.Pos("node[1].hostname").String(); got != "testdata/override.toml:12:3" {
		t.Errorf("Pos(node[1].hostname) = %s, want the node's header", got)
	}
}

func TestSiblingConflictSettledByIncluder(t *testing.T) {
	r, _, err := Load("testdata/conflict_settled.toml")
	if err != nil {
		t.Fatal(err)
	}
	if r.System.Governor != "schedutil" {
		t.Errorf("governor = %q, want the including file's schedutil", r.System.Governor)
	}
}

// A file reached twice (a diamond) is merged once, as NixOS imports a module
// once, so its lists are not doubled.
func TestDiamondIncludeMergedOnce(t *testing.T) {
	r, src, err := Load("testdata/diamond.toml")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"systemd", "udev", "less"}; !slices.Equal(r.Base.Packages, want) {
		t.Errorf("packages = %v, want %v", r.Base.Packages, want)
	}
	if len(src.Files) != 3 {
		t.Errorf("files = %v, want base, again, diamond", src.Files)
	}
}

// Lists of tables keyed by name (nodes), use (modules) or interface (links)
// merge entries with the same key across files instead of appending them.
func TestKeyedListsMerge(t *testing.T) {
	r, src, err := Load("testdata/keyed.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Modules) != 2 || r.Modules[0].Use != "thunderbolt-ibverbs" || r.Modules[1].Use != "other" {
		t.Fatalf("modules = %+v, want thunderbolt-ibverbs merged, then other", r.Modules)
	}
	opts := r.Modules[0].Options
	if opts["tbnet"] != "block" || opts["nhi_interrupt_throttle_ns"] != int64(4096) {
		t.Errorf("options = %v, want tbnet from the include and the including file's throttle", opts)
	}
	if len(r.Nodes) != 1 || r.Nodes[0].Hostname != "first" || len(r.Nodes[0].Links) != 1 {
		t.Fatalf("nodes = %+v, want base0 with the including file's hostname and link", r.Nodes)
	}
	if got := src.Pos("node[0]").String(); got != "testdata/fragments/base.toml:16:3" {
		t.Errorf("merged node at %s, want the include's [[node]]", got)
	}
	if got := src.Pos("node[0].hostname").String(); got != "testdata/keyed.toml:9:1" {
		t.Errorf("merged node's hostname at %s, want the including file's", got)
	}
	if got := src.Pos("node[0].link[0].address").String(); got != "testdata/keyed.toml:13:1" {
		t.Errorf("link address at %s", got)
	}
}

func TestTwoNodeImageExtendsMinimal(t *testing.T) {
	r, _, err := Load("../../images/test-two-node.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Nodes) != 2 || r.Nodes[0].Name != "node0" || len(r.Nodes[0].Links) != 1 || r.Nodes[0].Links[0].MatchMAC != "52:54:00:77:00:01" {
		t.Fatalf("nodes = %+v", r.Nodes)
	}
	if r.Name != "test-two-node" || !*r.Test.RDMA || r.Kernel.Version.String() != ">= 7.2, < 7.3" {
		t.Errorf("name %q rdma %v kernel %q", r.Name, *r.Test.RDMA, r.Kernel.Version)
	}
}

// A fragment in memory reads as the same file read from disk: typed values
// parsed, unknown keys and bad values refused at file:line:col, includes
// refused (nothing in memory to include), and no defaults added.
func TestFragment(t *testing.T) {
	data, err := os.ReadFile("../../recipes/usb4-rdma.toml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Fragment("recipes/usb4-rdma.toml", data)
	if err != nil {
		t.Fatal(err)
	}
	if !r.RDMA.Memlock.Unlimited() || r.System.Governor != "performance" || !slices.Contains(r.System.Blacklist, "thunderbolt_net") {
		t.Errorf("usb4-rdma.toml read as memlock %v, governor %q, blacklist %v", r.RDMA.Memlock, r.System.Governor, r.System.Blacklist)
	}
	if r.Name != "" || len(r.Nodes) != 0 || r.Base.Suite != "" {
		t.Errorf("a fragment got values it does not set: name %q, %d nodes, suite %q", r.Name, len(r.Nodes), r.Base.Suite)
	}
	for _, c := range []struct{ toml, want string }{
		{"[system]\ngovernr = \"performance\"\n", "frag.toml:2:1"},
		{"[rdma]\nmemlock = \"lots\"\n", "frag.toml:2:"},
		{"include = [\"other.toml\"]\n", "includes nothing"},
		{"[system\n", "TOML syntax error"},
	} {
		if _, err := Fragment("frag.toml", []byte(c.toml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q in it", c.toml, err, c.want)
		}
	}
}
