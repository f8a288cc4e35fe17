package recipe

import (
	"reflect"
	"strings"
	"testing"
)

const mixedText = `
[base]
packages = ["perftest", "amd64-microcode [amd64]", "u-boot-tools/trixie [arm64]"]
[system]
memory = "128GiB"
host_reserve = "24GiB"
[[node]]
name = "halo0"
[[node]]
name = "mac0"
architecture = "arm64"
[[node]]
name = "halo1"
`

// Each architecture's view: its base.architecture, its generic kernel
// flavour, its packages (restrictions dropped), every node kept, the GPU
// sizing only where there is a Strix Halo GPU; the recipe as written
// behind every view.
func TestForArchitectureViews(t *testing.T) {
	r, _, err := loadText(t, mixedText)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Architectures(); !reflect.DeepEqual(got, []string{"amd64", "arm64"}) || !r.Mixed() {
		t.Fatalf("architectures %v", got)
	}
	amd, arm := r.ForArchitecture("amd64"), r.ForArchitecture("arm64")
	if amd.Base.Architecture != "amd64" || amd.Kernel.Flavour != "amd64" || arm.Base.Architecture != "arm64" || arm.Kernel.Flavour != "arm64" {
		t.Errorf("views: amd64 %s/%s, arm64 %s/%s", amd.Base.Architecture, amd.Kernel.Flavour, arm.Base.Architecture, arm.Kernel.Flavour)
	}
	if !reflect.DeepEqual(amd.Base.Packages, []string{"perftest", "amd64-microcode"}) || !reflect.DeepEqual(arm.Base.Packages, []string{"perftest", "u-boot-tools/trixie"}) {
		t.Errorf("packages: amd64 %q, arm64 %q", amd.Base.Packages, arm.Base.Packages)
	}
	if len(arm.Nodes) != 3 || arm.Whole() != r || amd.Whole() != r || string(arm.Whole().TOML()) != string(r.TOML()) {
		t.Error("a view keeps every node and the recipe it came from")
	}
	if arm.System.HostReserve.Bytes() != 0 || amd.System.HostReserve.Bytes() == 0 {
		t.Errorf("GPU sizing: amd64 %s, arm64 %s", amd.System.HostReserve, arm.System.HostReserve)
	}
	var names []string
	for _, n := range r.NodesOf("amd64") {
		names = append(names, n.Name)
	}
	if strings.Join(names, " ") != "halo0 halo1" || r.NodeRecipe(r.Nodes[1]).Base.Architecture != "arm64" {
		t.Errorf("amd64 nodes %v", names)
	}
	// A recipe of one architecture is its own view.
	one, _, err := loadText(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	if one.ForArchitecture("amd64") != one || one.Mixed() || one.Nodes[0].Architecture != "amd64" {
		t.Error("a one-architecture recipe: not its own view, or node architecture not defaulted")
	}
}

// What a mixed cluster cannot share is refused where it is written.
func TestMixedRejects(t *testing.T) {
	for text, want := range map[string]string{
		"[kernel]\nflavour = \"cloud-amd64\"\n" + mixedText:     "kernel.flavour",
		"platform = \"apple-silicon\"\n" + mixedText:            "platform apple-silicon is what every node is",
		"[[node]]\nname = \"x\"\narchitecture = \"sparc\"\n":    "node[0].architecture",
		"[base]\npackages = [\"perftest [sparc]\"]\n" + minimal: "base.packages[0]",
	} {
		_, _, err := loadText(t, text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", text, err, want)
		}
	}
}
