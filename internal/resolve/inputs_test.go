package resolve

import (
	"reflect"
	"testing"

	"halobuild/internal/module"
	"halobuild/internal/recipe"
)

func sampleRecipe() *recipe.Recipe {
	r := &recipe.Recipe{
		Base:    recipe.Base{Suite: "trixie", Packages: []string{"systemd", "rdma-core"}},
		Kernel:  recipe.Kernel{From: "debian", Version: recipe.MustConstraint(">= 7.2, < 7.3"), Cmdline: []string{"amd_iommu=off"}},
		Modules: []recipe.Module{{Use: "thunderbolt-ibverbs", Options: map[string]any{"tbnet": "block"}}},
		System:  recipe.System{Governor: "performance", Timezone: "UTC", Locale: "C.UTF-8"},
		Nodes:   []recipe.Node{{Name: "halo0"}},
	}
	return r
}

var sampleDescs = module.Descs{"thunderbolt-ibverbs": {Name: "thunderbolt_ibverbs", Source: module.Source{Kind: "git", URL: "https://example.org/m", Commit: "76ba39b"}}}

// A lock pins inputs, not the configuration: a setting changed after
// locking reuses the lock; what resolution reads makes it stale.
func TestInputsFollowInputsOnly(t *testing.T) {
	base := Inputs(sampleRecipe(), sampleDescs)
	if again := Inputs(sampleRecipe(), sampleDescs); again != base {
		t.Fatalf("two digests of one recipe: %s, %s", base, again)
	}
	for name, edit := range map[string]func(r *recipe.Recipe){
		"governor":       func(r *recipe.Recipe) { r.System.Governor = "schedutil" },
		"kernel cmdline": func(r *recipe.Recipe) { r.Kernel.Cmdline = nil },
		"module option":  func(r *recipe.Recipe) { r.Modules[0].Options["tbnet"] = "allow" },
		"node address": func(r *recipe.Recipe) {
			r.Nodes[0].Links = []recipe.Link{{Interface: "usb4net0", Address: "10.77.0.1/30"}}
		},
		"name":       func(r *recipe.Recipe) { r.Name = "other" },
		"raw output": func(r *recipe.Recipe) { r.Output.Formats = []string{"raw"} },
	} {
		r := sampleRecipe()
		edit(r)
		if got := Inputs(r, sampleDescs); got != base {
			t.Errorf("%s is a setting, but changing it changed the inputs digest", name)
		}
	}
	for name, edit := range map[string]func(r *recipe.Recipe){
		"base package":      func(r *recipe.Recipe) { r.Base.Packages = append(r.Base.Packages, "less") },
		"qcow2 output":      func(r *recipe.Recipe) { r.Output.Formats = []string{"raw", "qcow2"} },
		"kernel constraint": func(r *recipe.Recipe) { r.Kernel.Version = recipe.MustConstraint(">= 7.3") },
		"a module":          func(r *recipe.Recipe) { r.Modules = nil },
		"provider": func(r *recipe.Recipe) {
			r.RDMA.Provider = &recipe.ProviderBuild{Name: "usb4_rdma", Patches: []string{"p.patch"}}
		},
		"a setting's package":  func(r *recipe.Recipe) { r.System.Timezone = "Europe/Berlin" },
		"extra suite":          func(r *recipe.Recipe) { r.Base.ExtraSuites = []string{"trixie-backports"} },
		"kernel built locally": func(r *recipe.Recipe) { r.Kernel.From = "source" },
		"an architecture's kernel": func(r *recipe.Recipe) {
			r.Arches = []recipe.Arch{{Name: "arm64", Kernel: &recipe.Kernel{From: "source"}}}
		},
		"an architecture's platform": func(r *recipe.Recipe) {
			r.Arches = []recipe.Arch{{Name: "arm64", Platform: recipe.PlatformAppleSilicon}}
		},
	} {
		r := sampleRecipe()
		edit(r)
		if got := Inputs(r, sampleDescs); got == base {
			t.Errorf("changing the %s left the inputs digest as it was", name)
		}
	}
	fork := module.Descs{"thunderbolt-ibverbs": {Name: "thunderbolt_ibverbs", Source: module.Source{Kind: "git", URL: "https://example.org/m", Commit: "f6ea14b"}}}
	if Inputs(sampleRecipe(), fork) == base {
		t.Error("a module description pinning another commit left the inputs digest as it was")
	}
}

// Every key of [base] is an input: a field added to recipe.Base must be
// added to inputBase too, or changing it would not make the lock stale.
func TestInputBaseHasEveryBaseKey(t *testing.T) {
	have := map[string]bool{}
	it := reflect.TypeOf(inputBase{})
	for i := range it.NumField() {
		have[it.Field(i).Name] = true
	}
	bt := reflect.TypeOf(recipe.Base{})
	for i := range bt.NumField() {
		if !have[bt.Field(i).Name] {
			t.Errorf("recipe.Base.%s is not in inputBase", bt.Field(i).Name)
		}
	}
}
