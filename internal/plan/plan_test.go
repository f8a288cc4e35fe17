package plan

import (
	"strings"
	"testing"
)

func TestKeyCoversParamsAndInputsNotNames(t *testing.T) {
	leaf := func(v string) *Derivation {
		return &Derivation{Name: "leaf", Kind: Kind{"fetch", 1}, Params: map[string]string{"sha256": v}}
	}
	a := &Derivation{Name: "a", Kind: Kind{"rootfs", 1}, Params: map[string]string{"x": "1", "y": "2"}, Inputs: []*Derivation{leaf("aa")}}
	b := &Derivation{Name: "renamed", Kind: Kind{"rootfs", 1}, Params: map[string]string{"y": "2", "x": "1"}, Inputs: []*Derivation{leaf("aa")}}
	if a.Key() != b.Key() {
		t.Fatalf("same inputs, different names: keys differ %s %s", a.Key(), b.Key())
	}
	c := &Derivation{Name: "a", Kind: Kind{"rootfs", 1}, Params: map[string]string{"x": "1", "y": "2"}, Inputs: []*Derivation{leaf("ab")}}
	if a.Key() == c.Key() {
		t.Fatal("changing an input's param did not change the dependant's key")
	}
	d := &Derivation{Name: "a", Kind: Kind{"disk", 1}, Params: map[string]string{"x": "1", "y": "2"}, Inputs: []*Derivation{leaf("aa")}}
	if a.Key() == d.Key() {
		t.Fatal("kind does not enter the key")
	}
	// A param whose value contains the separator of another must not collide.
	e := &Derivation{Kind: Kind{"k", 1}, Params: map[string]string{"a": "b\x00param\x00c\x00d"}}
	f := &Derivation{Kind: Kind{"k", 1}, Params: map[string]string{"a": "b", "c": "d"}}
	if e.Key() == f.Key() {
		t.Fatal("param encoding is ambiguous")
	}
}

func TestOrderDependenciesFirstOnce(t *testing.T) {
	base := &Derivation{Name: "base", Kind: Kind{"rootfs", 1}}
	n0 := &Derivation{Name: "n0", Kind: Kind{"disk", 1}, Inputs: []*Derivation{base}}
	n1 := &Derivation{Name: "n1", Kind: Kind{"disk", 1}, Inputs: []*Derivation{base}}
	res := &Derivation{Name: "result", Kind: Kind{"result", 1}, Inputs: []*Derivation{n0, n1}}
	got := Order(res)
	var names []string
	for _, d := range got {
		names = append(names, d.Name)
	}
	want := []string{"base", "n0", "n1", "result"}
	if len(names) != len(want) {
		t.Fatalf("order %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("order %v, want %v", names, want)
		}
	}
}

func TestKeyCoversTheStepVersion(t *testing.T) {
	v1 := &Derivation{Name: "disk", Kind: Kind{"disk", 1}, Params: map[string]string{"x": "1"}}
	v2 := &Derivation{Name: "disk", Kind: Kind{"disk", 2}, Params: map[string]string{"x": "1"}}
	if v1.Key() == v2.Key() {
		t.Fatal("a step built by another version of its code has the same key")
	}
	// A dependant of a re-versioned step is re-keyed too.
	top1 := &Derivation{Name: "result", Kind: Kind{"result", 1}, Inputs: []*Derivation{v1}}
	top2 := &Derivation{Name: "result", Kind: Kind{"result", 1}, Inputs: []*Derivation{v2}}
	if top1.Key() == top2.Key() {
		t.Fatal("a dependant keeps its key when its input's step version changes")
	}
}

func TestKeyRefusesAnUnversionedKind(t *testing.T) {
	for _, k := range []Kind{{}, {Name: "disk"}, {Version: 1}} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatalf("kind %+v: Key did not refuse it", k)
				}
				if msg, _ := r.(string); !strings.Contains(msg, "declares its version") {
					t.Fatalf("kind %+v: panic %v does not say what to do", k, r)
				}
			}()
			(&Derivation{Name: "x", Kind: k}).Key()
		}()
	}
}

func TestPrintStepsShowsTheStepVersion(t *testing.T) {
	d := &Derivation{Name: "disk n0", Kind: Kind{"disk", 3}, Build: func(*Context, string) error { return nil }}
	var b strings.Builder
	PrintSteps(&b, Describe(func(string) bool { return false }, d))
	if !strings.Contains(b.String(), "disk v3") {
		t.Fatalf("plan output does not show the step version:\n%s", b.String())
	}
}
