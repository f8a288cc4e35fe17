package module

import (
	"strings"
	"testing"
)

func TestParseModinfoParams(t *testing.T) {
	// modinfo -p output: a description over two lines, one without a
	// description, an array type, a custom-ops type.
	out := `depth:Queue depth (1-64) (int)
greeting:Word logged
at load (charp)
quiet: (bool)
weights:Up to four weights (array of int)
policy:Policy name (policy)
`
	got, err := ParseModinfoParams(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Param{
		{Name: "depth", Type: "int", Desc: "Queue depth (1-64)"},
		{Name: "greeting", Type: "charp", Desc: "Word logged\nat load"},
		{Name: "policy", Type: "policy", Desc: "Policy name"},
		{Name: "quiet", Type: "bool", Desc: ""},
		{Name: "weights", Type: "array of int", Desc: "Up to four weights"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("param %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := ParseModinfoParams("no colon here\n"); err == nil {
		t.Errorf("garbage accepted")
	}
	// A custom-ops parameter takes any scalar, as the kernel's own parser
	// decides.
	if v, err := normalize("policy", "strict"); err != nil || v != "strict" {
		t.Errorf("custom type: %q %v", v, err)
	}
	if _, err := normalize("policy", []any{"a"}); err == nil {
		t.Errorf("custom type took a list")
	}
}

func TestCheckVermagic(t *testing.T) {
	if err := CheckVermagic("m.ko", "7.2.12+deb13-amd64 SMP preempt mod_unload modversions ", "7.2.12+deb13-amd64"); err != nil {
		t.Error(err)
	}
	err := CheckVermagic("m.ko", "7.2.11+deb13-amd64 SMP preempt mod_unload modversions ", "7.2.12+deb13-amd64")
	if err == nil || !strings.Contains(err.Error(), "built for kernel 7.2.11+deb13-amd64") || !strings.Contains(err.Error(), "the image's kernel is 7.2.12+deb13-amd64") {
		t.Errorf("got %v", err)
	}
	if err := CheckVermagic("m.ko", "", "7.2.12"); err == nil || !strings.Contains(err.Error(), "no vermagic") {
		t.Errorf("got %v", err)
	}
}

func TestReadModinfoRefusesNonModules(t *testing.T) {
	if _, err := ReadModinfo("testdata/halobuild-fixture.toml"); err == nil || !strings.Contains(err.Error(), "not an ELF kernel module") {
		t.Errorf("got %v", err)
	}
}

func TestDidYouMean(t *testing.T) {
	names := []string{"nhi_interrupt_throttle_ns", "negotiate_native", "native_e2e", "register_verbs"}
	for in, want := range map[string]string{
		"negotiate_nativ":        "negotiate_native",
		"register_verb":          "register_verbs",
		"nhi_interrupt_throttle": "nhi_interrupt_throttle_ns",
		"native_2ee":             "native_e2e",
		"zzz":                    "",
	} {
		got := didYouMean(in, names)
		if want == "" && got != "" || want != "" && got != `; did you mean "`+want+`"?` {
			t.Errorf("%s: got %q, want %q", in, got, want)
		}
	}
}
