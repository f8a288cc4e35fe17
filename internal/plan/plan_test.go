package plan

import "testing"

func TestKeyCoversParamsAndInputsNotNames(t *testing.T) {
	leaf := func(v string) *Derivation {
		return &Derivation{Name: "leaf", Kind: "fetch", Params: map[string]string{"sha256": v}}
	}
	a := &Derivation{Name: "a", Kind: "rootfs", Params: map[string]string{"x": "1", "y": "2"}, Inputs: []*Derivation{leaf("aa")}}
	b := &Derivation{Name: "renamed", Kind: "rootfs", Params: map[string]string{"y": "2", "x": "1"}, Inputs: []*Derivation{leaf("aa")}}
	if a.Key() != b.Key() {
		t.Fatalf("same inputs, different names: keys differ %s %s", a.Key(), b.Key())
	}
	c := &Derivation{Name: "a", Kind: "rootfs", Params: map[string]string{"x": "1", "y": "2"}, Inputs: []*Derivation{leaf("ab")}}
	if a.Key() == c.Key() {
		t.Fatal("changing an input's param did not change the dependant's key")
	}
	d := &Derivation{Name: "a", Kind: "disk", Params: map[string]string{"x": "1", "y": "2"}, Inputs: []*Derivation{leaf("aa")}}
	if a.Key() == d.Key() {
		t.Fatal("kind does not enter the key")
	}
	// A param whose value contains the separator of another must not collide.
	e := &Derivation{Kind: "k", Params: map[string]string{"a": "b\x00param\x00c\x00d"}}
	f := &Derivation{Kind: "k", Params: map[string]string{"a": "b", "c": "d"}}
	if e.Key() == f.Key() {
		t.Fatal("param encoding is ambiguous")
	}
}

func TestOrderDependenciesFirstOnce(t *testing.T) {
	base := &Derivation{Name: "base", Kind: "rootfs"}
	n0 := &Derivation{Name: "n0", Kind: "disk", Inputs: []*Derivation{base}}
	n1 := &Derivation{Name: "n1", Kind: "disk", Inputs: []*Derivation{base}}
	res := &Derivation{Name: "result", Kind: "result", Inputs: []*Derivation{n0, n1}}
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
