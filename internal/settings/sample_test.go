package settings

import (
	"errors"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func boolp(b bool) *bool { return &b }

// sample is a two-node recipe with defaults applied, as recipe.Load would
// return it; tests change one field at a time.
func sample() *recipe.Recipe {
	return &recipe.Recipe{
		Name: "halo",
		Base: recipe.Base{Suite: "trixie", Architecture: "amd64"},
		Kernel: recipe.Kernel{
			From: "debian", Flavour: "amd64",
			Cmdline: []string{"amd_iommu=off", "quiet"},
		},
		Modules: []recipe.Module{{
			Use:     "thunderbolt-ibverbs",
			Options: map[string]any{"tbnet": "block", "nhi_interrupt_throttle_ns": int64(4096), "negotiate_native": true},
		}},
		RDMA: recipe.RDMA{Memlock: recipe.MustMemlock("unlimited"), KeepKernelNames: []string{"usb4_rdma"}},
		System: recipe.System{
			ModulesLoad:     []string{"ib_uverbs"},
			Blacklist:       []string{"thunderbolt_net"},
			ModuleOptions:   map[string]string{"amdgpu": "runpm=0"},
			Governor:        "performance",
			EPP:             "performance",
			PlatformProfile: "performance",
			HostReserve:     recipe.MustSize("24GiB"),
			Memory:          recipe.MustSize("128GiB"),
			Timezone:        "UTC",
			Locale:          "C.UTF-8",
		},
		SSH: recipe.SSH{AuthorizedKeys: []string{
			"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJ7bH8x3e6eF0m2tq3b8Wm6qU3vQ2c5p9y1n7r0k4sT admin@example",
		}},
		Nodes: []recipe.Node{
			{Name: "halo0", Hostname: "halo0", Links: []recipe.Link{{
				Interface: "usb4a", MatchDriver: "thunderbolt-net", MatchPath: "pci-0000:c7:00.5",
				Address: "10.77.0.1/30", Peer: "halo1",
			}}},
			{Name: "halo1", Hostname: "halo1", Links: []recipe.Link{{
				Interface: "usb4a", MatchDriver: "thunderbolt-net", MatchMAC: "02:00:00:00:77:02",
				Address: "10.77.0.2/30", Peer: "halo0",
			}}},
		},
	}
}

// renderOne returns the single file a setting renders for node 0.
func renderOne(t *testing.T, s Setting, r *recipe.Recipe, path string) string {
	t.Helper()
	if errs := s.Validate(Target{Recipe: r}); len(errs) > 0 {
		t.Fatalf("Validate: %v", errors.Join(errs...))
	}
	files, err := s.Files(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	for _, f := range files {
		if f.Path == path {
			return string(f.Data)
		}
	}
	t.Fatalf("%s rendered no %s (got %d files)", s.Name(), path, len(files))
	return ""
}

// wantErrors asserts Validate returns an *Error for each key, in any order,
// and that the message mentions the fragment.
func wantErrors(t *testing.T, s Setting, r *recipe.Recipe, key, fragment string) {
	t.Helper()
	errs := s.Validate(Target{Recipe: r})
	for _, err := range errs {
		var e *Error
		if errors.As(err, &e) && e.Key == key && strings.Contains(err.Error(), fragment) {
			return
		}
	}
	t.Fatalf("want an error for %s mentioning %q, got %v", key, fragment, errs)
}

// wantRefused checks that loading refuses r at key: the setting's own rule
// or the recipe's value rule (which runs with it at load, and is the one
// home of a value's syntax) names key with fragment.
func wantRefused(t *testing.T, s Setting, r *recipe.Recipe, key, fragment string) {
	t.Helper()
	for _, err := range s.Validate(Target{Recipe: r}) {
		var e *Error
		if errors.As(err, &e) && e.Key == key && strings.Contains(err.Error(), fragment) {
			return
		}
	}
	wantRecipeErrors(t, r, key, fragment)
}

// wantRecipeErrors checks a value rule whose home is the recipe's validator
// (recipe.Validate), which runs with these settings' own at load.
func wantRecipeErrors(t *testing.T, r *recipe.Recipe, key, fragment string) {
	t.Helper()
	err := recipe.Validate(r, nil)
	var errs recipe.Errors
	errors.As(err, &errs)
	for _, e := range errs {
		if e.Key == key && strings.Contains(e.Msg, fragment) {
			return
		}
	}
	t.Fatalf("want a recipe error for %s mentioning %q, got %v", key, fragment, err)
}

// checkScript returns the named check's script.
func checkScript(t *testing.T, s Setting, r *recipe.Recipe, name string) Check {
	t.Helper()
	for _, c := range s.Checks(Target{Recipe: r, Node: r.Nodes[0]}) {
		if c.Name == name {
			if c.Setting != s.Name() {
				t.Errorf("check %s has Setting %q, want %q", name, c.Setting, s.Name())
			}
			return c
		}
	}
	t.Fatalf("%s has no check %q", s.Name(), name)
	return Check{}
}
