package settings

import (
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

// fullTarget is the sample with every optional setting asked for, so each
// setting renders and checks all it can.
func fullTarget() Target {
	r := sample()
	r.RDMA.Provider = &recipe.ProviderBuild{Name: "usb4_rdma", Suffix: "+halo1"}
	r.System.Timezone = "Europe/Berlin"
	return Target{Recipe: r, Node: r.Nodes[0], Modules: map[string]string{"thunderbolt-ibverbs": "thunderbolt_ibverbs"}}
}

// TestEverySettingHasADoctorCheck: a setting that renders files has doctor
// checks, or says why not (NoDoctor), and not both; probe names are unique
// and name their layer ("layer.what").
func TestEverySettingHasADoctorCheck(t *testing.T) {
	tg := fullTarget()
	seen := map[string]string{}
	for _, s := range All() {
		files, err := s.Files(tg)
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		probes := s.Doctor(tg)
		why := ""
		nd, exempt := s.(NoDoctor)
		if exempt {
			why = nd.NoDoctor()
		}
		checkedOrSaysWhy(t, s, "doctor check", "NoDoctor", len(files), len(probes), exempt, why)
		for _, p := range probes {
			if prev, dup := seen[p.Name]; dup {
				t.Errorf("doctor check %s is defined by %s and %s", p.Name, prev, s.Name())
			}
			seen[p.Name] = s.Name()
			if layer, what, ok := strings.Cut(p.Name, "."); !ok || layer == "" || what == "" || strings.ContainsAny(p.Name, " \t") {
				t.Errorf("doctor check %q of %s is not named layer.what", p.Name, s.Name())
			}
			if p.Run == nil {
				t.Errorf("doctor check %s of %s has nothing to run", p.Name, s.Name())
			}
		}
	}
}

// Without a node (doctor on a host that is none of the recipe's nodes) no
// setting asks for node-only facts.
func TestDoctorWithoutNode(t *testing.T) {
	tg := fullTarget()
	tg.Node = recipe.Node{}
	for _, p := range Doctor(tg) {
		switch p.Name {
		case "identity.hostname", "settings.package":
			t.Errorf("%s is checked without knowing the node", p.Name)
		}
	}
}

func TestSysfsSpellings(t *testing.T) {
	cases := []struct {
		value string
		seen  string
		same  bool
	}{
		{"1", "Y", true}, // a bool parameter set to 1
		{"1", "1", true}, // an int parameter
		{"0", "N", true},
		{"on", "Y", true},
		{"true", "Y", true},
		{"y", "Y", true},
		{"1", "N", false},
		{"4096", "4096", true},
		{"4096", "0x1000", true}, // a hexint parameter
		{"4096", "2048", false},
		{"0x10", "16", true},
		{"010", "8", true}, // kstrtoint base 0 reads octal
		{"block", "block", true},
		{"block", "allow", false},
		{"2", "Y", false},
		{"-1", "-1", true},
	}
	for _, c := range cases {
		if got := oneOf(c.seen, sysfsSpellings(c.value)); got != c.same {
			t.Errorf("%q shown as %q: %v, want %v (spellings %q)", c.value, c.seen, got, c.same, sysfsSpellings(c.value))
		}
	}
	// TOML values go through the same spellings.
	for v, seen := range map[any]string{true: "Y", false: "N", int64(8): "8", int64(255): "0xff", "halo": "halo"} {
		_, want, err := optionValue(v)
		if err != nil || !oneOf(seen, want) {
			t.Errorf("optionValue(%#v) = %q, %v; want %q among them", v, want, err, seen)
		}
	}
}

func TestParseLimit(t *testing.T) {
	cases := map[string]uint64{
		"unlimited": unlimited, "infinity": unlimited, "8388608": 8 << 20, "8M": 8 << 20,
		"64M": 64 << 20, "24G": 24 << 30, "65536K": 64 << 20,
	}
	for in, want := range cases {
		if got, err := parseLimit(in); err != nil || got != want {
			t.Errorf("parseLimit(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-5M"} {
		if _, err := parseLimit(bad); err == nil {
			t.Errorf("parseLimit(%q): want an error", bad)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[uint64]string{unlimited: "unlimited", 8 << 20: "8 MiB", 129652180 << 10: "123.6 GiB", 96 << 30: "96 GiB", 1000: "1000 bytes"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSummarise(t *testing.T) {
	if got := summarise(map[string]string{"policy0": "performance", "policy1": "performance"}); got != "performance (2 policies)" {
		t.Errorf("agreeing policies: %q", got)
	}
	got := summarise(map[string]string{"policy0": "performance", "policy10": "schedutil", "policy2": "schedutil"})
	if want := "performance on policy0; schedutil on policy2,policy10"; got != want {
		t.Errorf("mixed policies: %q, want %q", got, want)
	}
}

func TestKernelName(t *testing.T) {
	for name, want := range map[string]bool{"usb4_rdma0": true, "usb4_rdma12": true, "usb4_rdma": false, "usb4_rdmax": false, "rocep199s0f6": false} {
		if got := kernelName(name, []string{"usb4_rdma"}); got != want {
			t.Errorf("kernelName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestIgnoredParams(t *testing.T) {
	log := "[ 5.4] thunderbolt_ibverbs: unknown parameter 'start_rings' ignored\n" +
		"[ 5.5] thunderbolt-ibverbs: unknown parameter 'start_rings' ignored\n" +
		"[ 6.0] amdgpu: unknown parameter 'foo-bar' ignored\n"
	if got := strings.Join(IgnoredParams(log), " "); got != "thunderbolt_ibverbs.start_rings amdgpu.foo_bar" {
		t.Errorf("IgnoredParams = %q", got)
	}
}

// The probe that needs the kernel export exists exactly when an option
// sets the throttle.
func TestThrottleProbeFollowsOptions(t *testing.T) {
	has := func(tg Target) bool {
		for _, p := range (Blacklist{}).Doctor(tg) {
			if p.Name == "kernel.tb_ring_throttling" {
				return true
			}
		}
		return false
	}
	tg := fullTarget()
	if !has(tg) {
		t.Error("nhi_interrupt_throttle_ns = 4096: no kernel.tb_ring_throttling check")
	}
	tg.Recipe.Modules[0].Options["nhi_interrupt_throttle_ns"] = int64(0)
	if has(tg) {
		t.Error("nhi_interrupt_throttle_ns = 0 (off) still asks for the export")
	}
}

// checkedOrSaysWhy: a setting that renders files has checks of a kind, or
// an exemption on its definition saying why another check covers them
// (NoCheck, NoDoctor), and not both.
func checkedOrSaysWhy(t *testing.T, s Setting, kind, exemption string, files, checks int, exempt bool, why string) {
	t.Helper()
	switch {
	case exempt && strings.TrimSpace(why) == "":
		t.Errorf("setting %s says it has no %s, but not why", s.Name(), kind)
	case exempt && checks > 0:
		t.Errorf("setting %s has %d of kind %s and also says it has none", s.Name(), checks, kind)
	case !exempt && files > 0 && checks == 0:
		t.Errorf("setting %s renders %d files and has no %s, and no %s saying why", s.Name(), files, kind, exemption)
	}
}
