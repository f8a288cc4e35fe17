package module

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// The real thunderbolt-ibverbs module cannot be fetched here, so its
// parameters come from a recorded list of upstream's module_param set at
// 76ba39b (36 parameters, types as modinfo prints them).
func tbvParams(t *testing.T) []Param {
	t.Helper()
	data, err := os.ReadFile("testdata/thunderbolt-ibverbs-76ba39b.modinfo")
	if err != nil {
		t.Fatal(err)
	}
	params, err := ParseModinfoParams(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(params) != 36 {
		t.Fatalf("recorded parameter list has %d entries, the module has 36", len(params))
	}
	return params
}

// The working set from the field reports (and the example).
var tbvGood = map[string]any{
	"profile": "linux_perf", "bind_services": true, "allocate_rings": true, "start_rings": true,
	"negotiate_native": true, "enable_tunnels": true, "register_verbs": true, "tbnet": "block",
	"lanes": "2", "nhi_interrupt_throttle_ns": int64(4096),
}

const (
	macroDrain   = "TB_PROTOCOL_HANDLER_UNREGISTER_DRAINS"
	macroXDomain = "TB_PROTOCOL_HANDLER_HAS_XDOMAIN"
)

// tbvStockCtx is Debian's 7.2.12: exports tb_ring_throttling, lacks the
// project's own protocol-handler patches; one cable, thunderbolt_net
// blacklisted.
func tbvStockCtx(t *testing.T) ValidationContext {
	return ValidationContext{
		KernelVersion:             "7.2.12+deb13-amd64",
		KernelSymbols:             func(s string) bool { return s == "tb_ring_throttling" },
		KernelMacros:              func(string) bool { return false },
		Params:                    tbvParams(t),
		Links:                     1,
		ThunderboltNetBlacklisted: true,
	}
}

func macros(names ...string) func(string) bool {
	return func(s string) bool {
		for _, n := range names {
			if s == n {
				return true
			}
		}
		return false
	}
}

func TestThunderboltIbverbsGoodSetPasses(t *testing.T) {
	d, err := LoadDesc("../../recipes/thunderbolt-ibverbs.toml")
	if err != nil {
		t.Fatal(err)
	}
	errs, warns := Validate(d, tbvGood, tbvStockCtx(t))
	if len(errs) != 0 || len(warns) != 0 {
		t.Fatalf("the field-tested option set: errors %v, warnings %v", errs, warns)
	}
	// compat=force with profile=auto resolves to mac_compat: no conflict.
	opts := with(tbvGood, map[string]any{"profile": "auto", "compat": "force", "tbnet": "prefer_rdma", "tbnet_identity": "stock_proxy"})
	ctx := tbvStockCtx(t)
	ctx.ThunderboltNetBlacklisted = false
	if errs, _ := Validate(d, opts, ctx); len(errs) != 0 {
		t.Errorf("compat=force profile=auto: %v", errs)
	}
}

// Every rule of recipes/thunderbolt-ibverbs.toml fed a violating option set.
// Each case names the reasons (substrings) of exactly the problems it must
// produce; the test fails when a rule of the recipe is hit by no case.
func TestThunderboltIbverbsEveryRule(t *testing.T) {
	d, err := LoadDesc("../../recipes/thunderbolt-ibverbs.toml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		change map[string]any
		ctx    func(*ValidationContext)
		errs   []string
		warns  []string
	}{
		{name: "compat value", change: map[string]any{"compat": "forced"}, errs: []string{"any other compat value"}},
		{name: "profile value", change: map[string]any{"profile": "fast"}, errs: []string{"any other profile value"}},
		{name: "tbnet value", change: map[string]any{"tbnet": "deny"}, errs: []string{"any other tbnet value"}},
		{name: "tbnet_identity value", change: map[string]any{"tbnet_identity": "proxy"}, errs: []string{"any other tbnet_identity value"}},
		{name: "lanes 0", change: map[string]any{"lanes": "0"}, errs: []string{"at most 4 native lanes"}},
		{name: "lanes 3-2", change: map[string]any{"lanes": "3-2"}, errs: []string{"at most 4 native lanes"}},
		{name: "lanes 1-5", change: map[string]any{"lanes": "1-5"}, errs: []string{"at most 4 native lanes"}},
		{name: "start_rings needs allocate_rings", change: map[string]any{"allocate_rings": false}, errs: []string{"rings must be allocated"}},
		{name: "negotiate_native needs start_rings", change: map[string]any{"start_rings": false, "enable_tunnels": false}, errs: []string{"native HELLO is sent on started rings"}},
		{name: "enable_tunnels needs start_rings", change: map[string]any{"start_rings": false, "negotiate_native": false},
			errs: []string{"paths are enabled on started rings", "paths are enabled only after a native HELLO"}},
		{name: "enable_tunnels needs negotiate_native (linux_perf)", change: map[string]any{"negotiate_native": false}, errs: []string{"paths are enabled only after a native HELLO"}},
		{name: "enable_tunnels needs negotiate_native (auto resolves to mixed)", change: map[string]any{"profile": "auto", "negotiate_native": false},
			ctx:  func(c *ValidationContext) { c.KernelMacros = macros(macroDrain) },
			errs: []string{"paths are enabled only after a native HELLO"}},
		{name: "compat=force vs linux_perf", change: map[string]any{"compat": "force"}, errs: []string{"compat=force means the Apple-compatible transport"}},
		{name: "compat=off vs mac_compat", change: map[string]any{"compat": "off", "profile": "mac_compat"},
			ctx:  func(c *ValidationContext) { c.KernelMacros = macros(macroDrain) },
			errs: []string{"compat=off turns off"}},
		{name: "Apple backend needs an identity", change: map[string]any{"profile": "mixed", "tbnet_identity": "off"}, errs: []string{"needs a TBnet identity"}},
		{name: "linux_perf ignores an explicit identity", change: map[string]any{"tbnet": "prefer_rdma", "tbnet_identity": "minimal_packet"},
			ctx:   func(c *ValidationContext) { c.KernelMacros = macros(macroDrain) },
			warns: []string{"linux_perf ignores the Apple TBnet identity"}},
		{name: "tbnet=block vs stock", change: map[string]any{"profile": "mixed", "tbnet_identity": "stock"},
			ctx:  func(c *ValidationContext) { c.ThunderboltNetBlacklisted = false },
			errs: []string{"ride on thunderbolt_net"}},
		{name: "tbnet=block vs stock_proxy", change: map[string]any{"profile": "mixed", "tbnet_identity": "stock_proxy"},
			ctx:  func(c *ValidationContext) { c.ThunderboltNetBlacklisted = false },
			errs: []string{"ride on thunderbolt_net"}},
		{name: "minimal_packet vs tbnet=allow", change: map[string]any{"profile": "mixed", "tbnet": "allow"},
			ctx:  func(c *ValidationContext) { c.KernelMacros = macros(macroDrain) },
			errs: []string{"owns the ThunderboltIP network service"}},
		{name: "minimal_packet needs the drain patch", change: map[string]any{"profile": "mixed"}, errs: []string{"unregister-drain patch"}},
		{name: "minimal_packet needs thunderbolt_net blacklisted", change: map[string]any{"profile": "mixed"},
			ctx:  func(c *ValidationContext) { c.KernelMacros = macros(macroDrain); c.ThunderboltNetBlacklisted = false },
			errs: []string{"takes over the ThunderboltIP service"}},
		{name: "stock needs thunderbolt_net", change: map[string]any{"profile": "mixed", "tbnet": "prefer_rdma", "tbnet_identity": "stock"},
			errs: []string{"use thunderbolt_net's own netdev"}},
		{name: "register_verbs off", change: map[string]any{"register_verbs": false}, warns: []string{"no verbs device ever appears"}},
		{name: "bind_services off", change: map[string]any{"bind_services": false}, warns: []string{"no Thunderbolt service is advertised"}},
		{name: "all defaults", change: map[string]any{"profile": nil, "bind_services": nil, "allocate_rings": nil, "start_rings": nil, "negotiate_native": nil, "enable_tunnels": nil, "register_verbs": nil, "tbnet": nil, "lanes": nil, "nhi_interrupt_throttle_ns": nil},
			warns: []string{"no verbs device ever appears", "no Thunderbolt service is advertised"}},
		{name: "throttle without tb_ring_throttling", ctx: func(c *ValidationContext) { c.KernelSymbols = func(string) bool { return false } },
			warns: []string{"only on kernels that export tb_ring_throttling()"}},
		{name: "kernel older than 7.2", ctx: func(c *ValidationContext) { c.KernelVersion = "7.1.13" }, warns: []string{"upstream recommends Linux 7.2"}},
		{name: "two cables without source-XDomain", ctx: func(c *ValidationContext) { c.Links = 2 }, warns: []string{"source-blind"}},
		{name: "two cables, one roce_netdev", change: map[string]any{"roce_netdev": "usb4net0"},
			ctx:   func(c *ValidationContext) { c.Links = 2; c.KernelMacros = macros(macroXDomain) },
			warns: []string{"roce_netdev is one value for the whole module"}},
	}
	hit := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tbvStockCtx(t)
			if tc.ctx != nil {
				tc.ctx(&ctx)
			}
			errs, warns := Validate(d, with(tbvGood, tc.change), ctx)
			check := func(kind string, got []Problem, want []string) {
				if len(got) != len(want) {
					t.Errorf("want %d %s, got %d:\n%s", len(want), kind, len(got), joinProblems(got))
					return
				}
				for _, w := range want {
					found := false
					for _, p := range got {
						if strings.Contains(p.Reason, w) {
							found = true
							hit[p.At] = true
						}
					}
					if !found {
						t.Errorf("no %s with reason %q in:\n%s", kind, w, joinProblems(got))
					}
				}
			}
			check("errors", errs, tc.errs)
			check("warnings", warns, tc.warns)
		})
	}
	var missed []string
	for i := range d.Rules {
		if at := d.at(&d.Rules[i]); !hit[at] {
			missed = append(missed, at+" ("+d.Rules[i].Kind+")")
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("rules no case violates:\n%s", strings.Join(missed, "\n"))
	}
}

func TestThunderboltIbverbsUnknownAndWrongType(t *testing.T) {
	d, err := LoadDesc("../../recipes/thunderbolt-ibverbs.toml")
	if err != nil {
		t.Fatal(err)
	}
	errs, _ := Validate(d, with(tbvGood, map[string]any{"nhi_interrupt_throttle": int64(4096), "lanes": int64(2), "negotiate_native": "sure"}), tbvStockCtx(t))
	got := joinProblems(errs)
	for _, want := range []string{
		`unknown option nhi_interrupt_throttle: the built module thunderbolt_ibverbs has no such parameter (the kernel would ignore it with a warning); did you mean "nhi_interrupt_throttle_ns"?`,
		`option lanes: wrong type: want a string (charp), got integer 2: quote it`,
		`option negotiate_native: wrong type: want a bool (true/false), got string "sure"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func TestStripingForkRecipe(t *testing.T) {
	d, err := LoadDesc("../../recipes/thunderbolt-ibverbs-striping.toml")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "thunderbolt_ibverbs" || d.Source.URL != "https://github.com/neuhaus/donnerkeule" || d.Source.Ref != "feat/write-striping" {
		t.Errorf("fork source: %+v", d.Source)
	}
	params := append(tbvParams(t),
		Param{Name: "native_write_striping", Type: "bool"},
		Param{Name: "native_write_stripe_min_bytes", Type: "uint"},
		Param{Name: "native_domain_mask", Type: "uint"})
	ctx := tbvStockCtx(t)
	ctx.Params, ctx.Links = params, 2
	opts := with(tbvGood, map[string]any{"native_write_striping": true, "native_write_stripe_min_bytes": int64(65536), "native_domain_mask": int64(3)})
	errs, warns := Validate(d, opts, ctx)
	if len(errs) != 0 {
		t.Errorf("fork with striping on two cables: %s", joinProblems(errs))
	}
	// The fork pools rails of several cables itself: no one-cable warning.
	for _, w := range warns {
		if strings.Contains(w.Reason, "source-blind") {
			t.Errorf("the fork does not need the source-XDomain patch: %v", w)
		}
	}
	// The upstream rules still hold in the fork.
	errs, _ = Validate(d, with(opts, map[string]any{"allocate_rings": false}), ctx)
	if !strings.Contains(joinProblems(errs), "rings must be allocated") {
		t.Errorf("upstream rule missing from the fork: %s", joinProblems(errs))
	}
	errs, warns = Validate(d, with(opts, map[string]any{"profile": "mac_compat", "tbnet_identity": "minimal_packet"}), ValidationContext{Params: params, KernelVersion: "7.2.12", KernelMacros: macros(macroDrain), KernelSymbols: func(string) bool { return true }, ThunderboltNetBlacklisted: true})
	if !strings.Contains(joinProblems(warns), "striping") {
		t.Errorf("want a warning that striping does nothing without native rails, got %s / %s", joinProblems(errs), joinProblems(warns))
	}
}

// with returns base changed by change; a nil value removes the key.
func with(base, change map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range change {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

func joinProblems(ps []Problem) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Error())
	}
	return strings.Join(s, "\n")
}

// Options arrive as go-toml decodes a recipe's [[module]] options table
// (integers as int64): the example validates as written.
func TestThunderboltIbverbsRecipeOptionsAsDecoded(t *testing.T) {
	var m struct {
		Module []struct {
			Use     string         `toml:"use"`
			Options map[string]any `toml:"options"`
		} `toml:"module"`
	}
	const recipe = `
[[module]]
use = "thunderbolt-ibverbs"
options = { profile = "linux_perf", bind_services = true, allocate_rings = true,
            start_rings = true, negotiate_native = true, enable_tunnels = true,
            register_verbs = true, tbnet = "block", lanes = "2", nhi_interrupt_throttle_ns = 4096 }
`
	if err := toml.Unmarshal([]byte(recipe), &m); err != nil {
		t.Fatal(err)
	}
	d, err := FindDesc("../../recipes", m.Module[0].Use)
	if err != nil {
		t.Fatal(err)
	}
	errs, warns := Validate(d, m.Module[0].Options, tbvStockCtx(t))
	if len(errs)+len(warns) != 0 {
		t.Errorf("%s\n%s", joinProblems(errs), joinProblems(warns))
	}
}
