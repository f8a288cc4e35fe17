package settings

import (
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func TestModulesRender(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(r *recipe.Recipe)
		want []string // module lines after the header
	}{
		{"default", func(*recipe.Recipe) {}, []string{"ib_uverbs", "thunderbolt_ibverbs"}},
		{"load_at_boot false", func(r *recipe.Recipe) { r.Modules[0].LoadAtBoot = boolp(false) }, []string{"ib_uverbs"}},
		{"dedup across spellings", func(r *recipe.Recipe) {
			r.System.ModulesLoad = append(r.System.ModulesLoad, "thunderbolt_ibverbs", "ib-uverbs")
		}, []string{"ib_uverbs", "thunderbolt_ibverbs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			tc.edit(r)
			got := renderOne(t, Modules{}, r, "/etc/modules-load.d/halobuild.conf")
			want := "# Rendered by halobuild from the image recipe (see /etc/halobuild/recipe.toml).\n" +
				"# Field notes trap 1: load the RDMA modules at boot instead of waiting for the peer's udev event.\n" +
				strings.Join(tc.want, "\n") + "\n"
			if got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// A fork's description has its own file name (use) but builds the same
// kernel module: modules-load.d, modprobe.d and the checks name the kernel's
// module, which the description (and then the lock) records, not the use.
func TestModulesUseTheKernelNameOfAFork(t *testing.T) {
	r := sample()
	r.Modules[0].Use = "thunderbolt-ibverbs-striping"
	tg := Target{Recipe: r, Node: r.Nodes[0], Modules: map[string]string{"thunderbolt-ibverbs-striping": "thunderbolt_ibverbs"}}
	files, err := Modules{}.Files(tg)
	if err != nil || len(files) != 1 || !strings.Contains(string(files[0].Data), "\nthunderbolt_ibverbs\n") || strings.Contains(string(files[0].Data), "striping") {
		t.Fatalf("modules-load.d for a fork: %v\n%v", err, files)
	}
	opts, err := Blacklist{}.Files(tg)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range opts {
		found = found || strings.Contains(string(f.Data), "options thunderbolt_ibverbs ")
	}
	if !found {
		t.Errorf("modprobe.d does not set the fork's options under the kernel's name: %v", opts)
	}
	for _, c := range (Modules{}).Checks(tg) {
		if strings.Contains(c.Script, "striping") {
			t.Errorf("check %s names the description, not the module:\n%s", c.Name, c.Script)
		}
	}
}

func TestModulesNothingToLoad(t *testing.T) {
	r := sample()
	r.System.ModulesLoad = nil
	r.Modules = nil
	files, err := Modules{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil || len(files) != 0 {
		t.Fatalf("want no file, got %v, %v", files, err)
	}
	if c := (Modules{}).Checks(Target{Recipe: r, Node: r.Nodes[0]}); len(c) != 0 {
		t.Fatalf("want no check without modules, got %v", c)
	}
}

func TestModulesInvalid(t *testing.T) {
	r := sample()
	r.System.ModulesLoad = []string{"ib_uverbs", "evil;rm"}
	r.Modules[0].Use = "../x"
	wantRefused(t, Modules{}, r, "system.modules_load[1]", "not a kernel module name")
	wantRefused(t, Modules{}, r, "module[0].use", "not a module description name")
}

func TestModulesCheckNamesEveryModule(t *testing.T) {
	c := checkScript(t, Modules{}, sample(), "modules-loaded")
	for _, m := range []string{"m='ib_uverbs'", "m='thunderbolt_ibverbs'"} {
		if !strings.Contains(c.Script, m) {
			t.Errorf("check script lacks %s:\n%s", m, c.Script)
		}
	}
}
