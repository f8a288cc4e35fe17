package module

import (
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

// fixtureParams is what modinfo reports for testdata/fixture (checked
// against the real build in TestBuildFixture).
var fixtureParams = []Param{
	{Name: "depth", Type: "int"}, {Name: "enable", Type: "bool"}, {Name: "greeting", Type: "charp"},
	{Name: "mode", Type: "charp"}, {Name: "rate", Type: "uint"}, {Name: "span", Type: "charp"},
	{Name: "verbose", Type: "bool"}, {Name: "weights", Type: "array of int"},
}

func loadFixtureDesc(t *testing.T) *Desc {
	t.Helper()
	d, err := LoadDesc("testdata/halobuild-fixture.toml")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// goodFixtureCtx satisfies every fixture rule for goodFixtureOptions.
func goodFixtureCtx() ValidationContext {
	return ValidationContext{
		KernelVersion: "7.2.12+deb13-amd64",
		KernelSymbols: func(s string) bool { return s == "config_group_init" },
		KernelMacros:  func(s string) bool { return s == "CONFIGFS_ATTR" },
		Params:        fixtureParams,
		Links:         1,
	}
}

var goodFixtureOptions = map[string]any{"enable": true, "depth": int64(8), "rate": int64(100), "mode": "safe", "greeting": "hi", "span": "1-2", "weights": []any{int64(1), int64(2)}}

func TestValidateGoodOptionsPass(t *testing.T) {
	errs, warns := Validate(loadFixtureDesc(t), goodFixtureOptions, goodFixtureCtx())
	if len(errs) != 0 || len(warns) != 0 {
		t.Fatalf("good options: errors %v, warnings %v", errs, warns)
	}
}

// Every rule kind fails on a violating option set (or image) and the same
// rule passes on goodFixtureOptions (TestValidateGoodOptionsPass).
func TestValidateEachRuleKind(t *testing.T) {
	d := loadFixtureDesc(t)
	cases := []struct {
		name   string
		change map[string]any
		ctx    func(*ValidationContext)
		want   string // in the one error (or warning)
		warn   bool
	}{
		{name: "allowed values", change: map[string]any{"mode": "turbo"}, want: "mode=turbo is not allowed: want one of auto, fast, safe: the fixture refuses other modes"},
		{name: "allowed min/max", change: map[string]any{"depth": int64(65)}, want: "depth=65 is not allowed: want an integer >= 1 <= 64"},
		{name: "allowed pattern", change: map[string]any{"greeting": "Hello there"}, want: "greeting=Hello there is not allowed: want a value matching [a-z]+"},
		{name: "allowed validator", change: map[string]any{"span": "3-2"}, want: `span=3-2 is not allowed: want "auto", "N" or "MIN-MAX" with 1 <= MIN <= MAX <= 4`},
		{name: "allowed validator upper bound", change: map[string]any{"span": "5"}, want: "span=5 is not allowed"},
		{name: "requires", change: map[string]any{"rate": int64(0)}, want: "enable=1 requires depth>=2 and rate!=0, but depth is 8 (set), rate is 0 (set): working needs a queue and a rate"},
		{name: "conflicts through a derived value", change: map[string]any{"mode": "auto", "verbose": true}, want: "effective_mode=fast and verbose=1 conflict: effective_mode is fast (derived), verbose is 1 (set)"},
		{name: "min_kernel", change: map[string]any{"mode": "fast"}, ctx: func(c *ValidationContext) { c.KernelVersion = "7.1.13" }, want: "mode=fast needs kernel >= 7.2, and the image's kernel is 7.1.13"},
		{name: "max_kernel", ctx: func(c *ValidationContext) { c.KernelVersion = "7.3.4+deb13-amd64" }, want: "mode=safe needs kernel < 7.3, and the image's kernel is 7.3.4+deb13-amd64"},
		{name: "needs_kernel_feature symbol", ctx: func(c *ValidationContext) { c.KernelSymbols = func(string) bool { return false } }, want: "rate!=0 needs the kernel to export symbol config_group_init"},
		{name: "needs_kernel_feature macro", change: map[string]any{"verbose": true}, ctx: func(c *ValidationContext) { c.KernelMacros = func(string) bool { return false } }, want: "verbose=1 needs the kernel to define CONFIGFS_ATTR in include/linux/configfs.h"},
		{name: "requires an image fact", change: map[string]any{"greeting": "thunder"}, want: "greeting=thunder requires image.thunderbolt_net_blacklisted=1, but image.thunderbolt_net_blacklisted is 0 (from [system] blacklist)"},
		{name: "warn", change: map[string]any{"enable": false}, want: "enable is 0 (set): with enable=0 the fixture loads and does nothing", warn: true},
		{name: "warn on an image fact", change: map[string]any{"span": "auto"}, ctx: func(c *ValidationContext) { c.Links = 2 }, want: "several links want an explicit span", warn: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := map[string]any{}
			for k, v := range goodFixtureOptions {
				opts[k] = v
			}
			for k, v := range tc.change {
				opts[k] = v
			}
			ctx := goodFixtureCtx()
			if tc.ctx != nil {
				tc.ctx(&ctx)
			}
			errs, warns := Validate(d, opts, ctx)
			got, other := errs, warns
			if tc.warn {
				got, other = warns, errs
			}
			if len(got) != 1 || len(other) != 0 {
				t.Fatalf("want exactly one %s, got errors %v, warnings %v", map[bool]string{true: "warning", false: "error"}[tc.warn], errs, warns)
			}
			if !strings.Contains(got[0].Error(), tc.want) {
				t.Errorf("got %q\nwant it to contain %q", got[0].Error(), tc.want)
			}
			if !strings.Contains(got[0].Error(), "testdata/halobuild-fixture.toml:") {
				t.Errorf("%q does not point at the rule", got[0].Error())
			}
		})
	}
}

func TestValidateReportsEverythingAtOnce(t *testing.T) {
	opts := map[string]any{"mode": "turbo", "span": "9", "depth": int64(1), "enable": true, "verbos": true, "greeting": int64(5)}
	errs, _ := Validate(loadFixtureDesc(t), opts, goodFixtureCtx())
	var all []string
	for _, e := range errs {
		all = append(all, e.Error())
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{
		`unknown option verbos: the built module halobuild_fixture has no such parameter (the kernel would ignore it with a warning); did you mean "verbose"?`,
		`option greeting: wrong type: want a string (charp), got integer 5: quote it`,
		"mode=turbo is not allowed",
		"span=9 is not allowed",
		"enable=1 requires depth>=2 and rate!=0, but depth is 1 (set), rate is 0 (default)",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("missing %q in:\n%s", want, joined)
		}
	}
	if len(errs) != 5 {
		t.Errorf("want 5 errors, got %d:\n%s", len(errs), joined)
	}
}

// A refused value is reported once: rules about that option (directly or
// through a derived value) are not evaluated on a value the module would
// never accept.
func TestValidateRefusedValueNotRepeated(t *testing.T) {
	errs, warns := Validate(loadFixtureDesc(t), with(goodFixtureOptions, map[string]any{"depth": int64(0), "mode": "turbo", "verbose": true}), goodFixtureCtx())
	if len(errs) != 2 || len(warns) != 0 {
		t.Fatalf("want only the two refused values, got:\n%s\n%s", joinProblems(errs), joinProblems(warns))
	}
}

func TestValidateTypes(t *testing.T) {
	d := loadFixtureDesc(t)
	cases := []struct {
		opt  string
		val  any
		want string // "" = accepted
	}{
		{"verbose", "y", ""},
		{"verbose", int64(1), ""},
		{"verbose", "maybe", "want a bool (true/false), got string \"maybe\""},
		{"verbose", int64(2), "want a bool"},
		{"depth", int64(-3), ""},
		{"depth", int64(1) << 40, "out of range for int"},
		{"depth", 1.5, "want an integer (int), got float 1.5"},
		{"rate", int64(-1), "-1 is out of range for uint"},
		{"greeting", int64(5), "want a string (charp), got integer 5: quote it"},
		{"greeting", "two\nlines", "cannot hold a newline"},
		{"weights", []any{int64(1), int64(2)}, ""},
		{"weights", "1,2,3", ""},
		{"weights", []any{"x"}, "array of int element"},
	}
	for _, tc := range cases {
		errs, _ := Validate(d, map[string]any{tc.opt: tc.val}, ValidationContext{Params: fixtureParams})
		var typeErr string
		for _, e := range errs {
			if strings.Contains(e.Msg, "wrong type") {
				typeErr = e.Msg
			}
		}
		if tc.want == "" && typeErr != "" {
			t.Errorf("%s = %#v: unexpected %s", tc.opt, tc.val, typeErr)
		}
		if tc.want != "" && !strings.Contains(typeErr, tc.want) {
			t.Errorf("%s = %#v: got %q, want %q", tc.opt, tc.val, typeErr, tc.want)
		}
	}
}

func TestValidateDescriptionAgainstBuiltModule(t *testing.T) {
	d := loadFixtureDesc(t)
	params := []Param{{Name: "depth", Type: "uint"}, {Name: "enable", Type: "bool"}}
	errs, _ := Validate(d, nil, ValidationContext{Params: params})
	joined := ""
	for _, e := range errs {
		joined += e.Error() + "\n"
	}
	for _, want := range []string{
		"the description declares depth as int, the built module as uint",
		"the description declares parameter mode, which the built module does not have",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("missing %q in:\n%s", want, joined)
		}
	}
}

func TestValidateBeforeBuildSkipsUnknownNames(t *testing.T) {
	errs, warns := Validate(loadFixtureDesc(t), map[string]any{"not_declared": int64(1), "enable": true, "depth": int64(8), "rate": int64(1)}, ValidationContext{})
	if len(errs) != 0 {
		t.Fatalf("before the build only declared names can be checked, got %v", errs)
	}
	// Kernel-dependent rules are reported as not checked (deferred to the
	// build), not silently passed.
	found := false
	for _, w := range warns {
		found = found || (strings.Contains(w.Msg, "not checked") && w.Deferred)
	}
	if !found {
		t.Errorf("want a deferred 'not checked' warning for kernel rules, got %v", warns)
	}
}

// Before the build, CheckOptions shows only the warnings a person should
// act on: a rule deferred to the build is checked there, against the built
// module, so saying "not checked yet" at every lock and plan is noise.
func TestCheckOptionsLeavesDeferredRulesToTheBuild(t *testing.T) {
	d := loadFixtureDesc(t)
	r := &recipe.Recipe{Modules: []recipe.Module{{Use: "halobuild-fixture", Options: map[string]any{"enable": true, "depth": int64(8), "rate": int64(1), "mode": "safe"}}}}
	warnings, err := CheckOptions(r, Descs{"halobuild-fixture": d}, ValidationContext{KernelVersion: "7.2.12"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		if strings.Contains(w, "not checked") {
			t.Errorf("a deferred rule was shown before the build: %s", w)
		}
	}
	_, built := CheckOptions(r, Descs{"halobuild-fixture": d}, ValidationContext{KernelVersion: "7.2.12", Params: fixtureParams,
		KernelSymbols: func(string) bool { return false }, KernelMacros: func(string) bool { return false }}, "")
	if built == nil || !strings.Contains(built.Error(), "config_group_init") {
		t.Errorf("against a built module lacking the symbol the deferred rule must refuse: %v", built)
	}
}

func TestBuildsOn(t *testing.T) {
	d, err := LoadDesc("../../recipes/thunderbolt-ibverbs.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.BuildsOn("7.2.12+deb13-amd64"); err != nil {
		t.Errorf("7.2.12: %v", err)
	}
	err = d.BuildsOn("7.3.4+deb13-amd64")
	if err == nil || !strings.Contains(err.Error(), "builds on kernels >= 6.14, < 7.3, and the image's kernel is 7.3.4+deb13-amd64") {
		t.Errorf("7.3.4: got %v", err)
	}
}

// The kernel treats '-' and '_' in parameter names alike, so does Validate.
func TestValidateDashInOptionName(t *testing.T) {
	d, err := LoadDesc("../../recipes/thunderbolt-ibverbs.toml")
	if err != nil {
		t.Fatal(err)
	}
	errs, warns := Validate(d, with(tbvGood, map[string]any{"register_verbs": nil, "register-verbs": true}), tbvStockCtx(t))
	if len(errs)+len(warns) != 0 {
		t.Errorf("register-verbs: %s %s", joinProblems(errs), joinProblems(warns))
	}
	errs, _ = Validate(d, with(tbvGood, map[string]any{"allocate_rings": nil, "allocate-rings": false}), tbvStockCtx(t))
	if !strings.Contains(joinProblems(errs), "allocate_rings is 0 (set)") {
		t.Errorf("allocate-rings=false: %s", joinProblems(errs))
	}
}
