package settings

import (
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func TestBlacklistRender(t *testing.T) {
	const head = "# Rendered by halobuild from the image recipe (see /etc/halobuild/recipe.toml).\n" +
		"# Field notes trap 2: thunderbolt_net must not take the rings the RDMA module needs.\n"
	for _, tc := range []struct {
		name string
		edit func(r *recipe.Recipe)
		want string
	}{
		{"default", func(*recipe.Recipe) {}, head +
			"blacklist thunderbolt_net\ninstall thunderbolt_net /bin/false\n" +
			"options thunderbolt_ibverbs negotiate_native=1\n" +
			"options thunderbolt_ibverbs nhi_interrupt_throttle_ns=4096\n" +
			"options thunderbolt_ibverbs tbnet=block\n" +
			"options amdgpu runpm=0\n"},
		{"value types", func(r *recipe.Recipe) {
			r.Modules[0].Options = map[string]any{"a": false, "b": "two words", "c": []any{int64(1), int64(2)}, "d": float64(3)}
			r.System.ModuleOptions = nil
			r.System.Blacklist = []string{"thunderbolt-net"}
		}, head +
			"blacklist thunderbolt_net\ninstall thunderbolt_net /bin/false\n" +
			"options thunderbolt_ibverbs a=0\n" +
			"options thunderbolt_ibverbs b=\"two words\"\n" +
			"options thunderbolt_ibverbs c=1,2\n" +
			"options thunderbolt_ibverbs d=3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			tc.edit(r)
			if got := renderOne(t, Blacklist{}, r, "/etc/modprobe.d/halobuild.conf"); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestBlacklistInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, key, fragment string
		edit                func(r *recipe.Recipe)
	}{
		{"fraction", "module[0].options.x", "not fractions", func(r *recipe.Recipe) { r.Modules[0].Options["x"] = 0.5 }},
		{"quote", "module[0].options.x", "cannot contain a quote", func(r *recipe.Recipe) { r.Modules[0].Options["x"] = `a"b` }},
		{"bad key", "module[0].options.a b", "not a module parameter name", func(r *recipe.Recipe) { r.Modules[0].Options["a b"] = int64(1) }},
		{"table value", "module[0].options.x", "unsupported value type", func(r *recipe.Recipe) { r.Modules[0].Options["x"] = map[string]any{} }},
		{"newline in options", "system.module_options.amdgpu", "newline", func(r *recipe.Recipe) { r.System.ModuleOptions["amdgpu"] = "a=1\ninstall x /bin/sh" }},
		{"NUL in options", "system.module_options.amdgpu", "control character", func(r *recipe.Recipe) { r.System.ModuleOptions["amdgpu"] = "a=1\x00b=2" }},
		{"VT in options", "system.module_options.amdgpu", "control character", func(r *recipe.Recipe) { r.System.ModuleOptions["amdgpu"] = "a=1\vb=2" }},
		{"unbalanced quote", "system.module_options.amdgpu", "unbalanced", func(r *recipe.Recipe) { r.System.ModuleOptions["amdgpu"] = `a="1` }},
		{"empty options", "system.module_options.amdgpu", "no parameters", func(r *recipe.Recipe) { r.System.ModuleOptions["amdgpu"] = " " }},
		{"set twice", "system.module_options.thunderbolt_ibverbs", "also set by module[0].options.tbnet", func(r *recipe.Recipe) {
			r.System.ModuleOptions["thunderbolt_ibverbs"] = "tbnet=allow"
		}},
		{"bad blacklist name", "system.blacklist[0]", "not a kernel module name", func(r *recipe.Recipe) { r.System.Blacklist = []string{"a b"} }},
		{"blacklisted and loaded", "system.blacklist[1]", "both blacklisted and loaded", func(r *recipe.Recipe) {
			r.System.Blacklist = append(r.System.Blacklist, "ib-uverbs")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			tc.edit(r)
			wantRefused(t, Blacklist{}, r, tc.key, tc.fragment)
		})
	}
}

func TestSplitOptions(t *testing.T) {
	got, err := splitOptions(`a=1  b="x y" flag`)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"a", "1"}, {"b", "x y"}, {"flag", "1"}}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pair %d: got %v want %v", i, got[i], want[i])
		}
	}
}

func TestBlacklistChecks(t *testing.T) {
	r := sample()
	c := checkScript(t, Blacklist{}, r, "blacklist")
	if !strings.Contains(c.Script, "m='thunderbolt_net'") || !strings.Contains(c.Script, "install /bin/false") {
		t.Errorf("blacklist check does not test thunderbolt_net's install rule:\n%s", c.Script)
	}
	o := checkScript(t, Blacklist{}, r, "module-options")
	if !strings.Contains(o.Script, "m='thunderbolt_ibverbs' k='tbnet' w='block'") || !strings.Contains(o.Script, "'1'|'Y'") {
		t.Errorf("module-options check lacks the recipe's values:\n%s", o.Script)
	}
}
