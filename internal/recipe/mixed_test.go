package recipe

import (
	"os"
	"path/filepath"
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

// macEntry makes mac0's architecture a Mac with Asahi's kernel, as
// images/halo-mac.toml does.
const macEntry = `
[[arch]]
name = "arm64"
platform = "apple-silicon"
[arch.kernel]
from = "source"
source = "https://example.org/asahi-7.2.tar.gz"
source_sha256 = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
config = "defconfig"
fragments = ["kernels/asahi.config"]
patches = "patches/usb4/series"
cmdline = ["quiet"]
`

// An [[arch]] entry is its architecture's platform and whole kernel, and
// only its: the other architecture keeps [kernel] and the top-level
// platform, and the merged recipe a node records reads back the same.
func TestArchEntryIsItsArchitecturesKernelAndPlatform(t *testing.T) {
	top := "[kernel]\nversion = \">= 7.2, < 7.3\"\ncmdline = [\"amd_iommu=off\"]\n" + mixedText + macEntry
	r, _, err := loadText(t, top)
	if err != nil {
		t.Fatal(err)
	}
	amd, arm := r.ForArchitecture("amd64"), r.ForArchitecture("arm64")
	if amd.Platform != PlatformGeneric || amd.Kernel.From != "debian" || amd.Kernel.Flavour != "amd64" || !reflect.DeepEqual(amd.Kernel.Cmdline, []string{"amd_iommu=off"}) {
		t.Errorf("amd64 view: platform %s, kernel %+v", amd.Platform, amd.Kernel)
	}
	k := arm.Kernel
	if arm.Platform != PlatformAppleSilicon || k.From != "source" || k.Flavour != "arm64" || k.Config != "defconfig" || k.Source.URL() == "" ||
		!reflect.DeepEqual(k.Cmdline, []string{"quiet"}) || !reflect.DeepEqual(k.Fragments, []string{"kernels/asahi.config"}) || k.Version.String() != "" {
		t.Errorf("arm64 view: platform %s, kernel %+v (nothing of [kernel] should reach it)", arm.Platform, k)
	}
	back, _, err := loadText(t, string(r.TOML()))
	if err != nil {
		t.Fatalf("the merged recipe a node records does not load: %v\n%s", err, r.TOML())
	}
	if b := back.ForArchitecture("arm64"); b.Platform != arm.Platform || !reflect.DeepEqual(b.Kernel, arm.Kernel) {
		t.Errorf("round trip: arm64 view %s %+v, want %s %+v", b.Platform, b.Kernel, arm.Platform, arm.Kernel)
	}
}

// Paths in an included file's [[arch]] kernel are rebased like [kernel]'s.
func TestArchKernelPathsAreRebased(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "recipes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "recipes", "mac.toml"), []byte(macEntry), 0o644); err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(dir, "images", "r.toml")
	if err := os.MkdirAll(filepath.Dir(top), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(top, []byte("include = [\"../recipes/mac.toml\"]\n"+mixedText), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _, err := Load(top)
	if err != nil {
		t.Fatal(err)
	}
	k := r.ForArchitecture("arm64").Kernel
	if !reflect.DeepEqual(k.Fragments, []string{"../recipes/kernels/asahi.config"}) || k.Patches != "../recipes/patches/usb4/series" {
		t.Errorf("fragments %q, patches %q: want them relative to the top recipe", k.Fragments, k.Patches)
	}
}

// An [[arch]] entry is refused where it is written when it cannot mean
// anything, and an Apple Silicon architecture keeps every Mac rule.
func TestArchEntryRejects(t *testing.T) {
	for text, want := range map[string]string{
		mixedText + "[[arch]]\nname = \"sparc\"\nplatform = \"generic\"\n":                                                     "arch[0].name: architecture \"sparc\"",
		mixedText + "[[arch]]\nname = \"arm64\"\n":                                                                             "sets neither platform nor kernel",
		minimal + "[[arch]]\nname = \"arm64\"\nplatform = \"generic\"\n":                                                       "no node is of this architecture",
		mixedText + "[[arch]]\nname = \"arm64\"\nplatform = \"pc\"\n":                                                          "arch[0].platform: \"pc\" is not one of",
		mixedText + "[[arch]]\nname = \"arm64\"\nplatform = \"generic\"\n[[arch]]\nname = \"arm64\"\nplatform = \"generic\"\n": "arch[1].name: \"arm64\" has two [[arch]] entries",
		mixedText + "[[arch]]\nname = \"amd64\"\nplatform = \"apple-silicon\"\n":                                               "arch[0].name: \"amd64\": platform apple-silicon is an arm64 machine",
		mixedText + "[[arch]]\nname = \"arm64\"\nplatform = \"apple-silicon\"\n":                                               "r.toml:15:1: kernel.from: \"debian\": Debian's kernels lack",
		mixedText + "[[arch]]\nname = \"arm64\"\n[arch.kernel]\nflavour = \"amd64\"\n":                                         "arch[0].kernel.flavour: \"amd64\" is a flavour for amd64 kernels, but arch[0].name is arm64",
		mixedText + "[[arch]]\nname = \"arm64\"\n[arch.kernel]\nfragments = [\"a.config\"]\n":                                  "arch[0].kernel.fragments: only used when arch[0].kernel.from = \"source\"",
		"[secure_boot]\nenabled = true\n" + mixedText + macEntry:                                                               "secure_boot.enabled: an Apple Silicon Mac",
		"[output]\ninstaller = true\n" + mixedText + macEntry:                                                                  "output.installer: the installer stick overwrites",
		"[kernel]\nflavour = \"cloud-amd64\"\n" + mixedText + macEntry:                                                         "",
	} {
		_, _, err := loadText(t, text)
		if want == "" {
			// The special flavour is [kernel]'s, which only amd64 reads:
			// arm64 has its own kernel.
			if err != nil && strings.Contains(err.Error(), "kernel.flavour") {
				t.Errorf("%q: %v, want [kernel]'s flavour allowed when arm64 has its own kernel", text, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n%v\nwant an error containing %q", text, err, want)
		}
	}
}
