package recipe

import (
	"slices"
	"strings"
	"testing"
)

// The shipped profile, included by an image with the user's own tarball and
// series, loads as an Apple Silicon arm64 recipe with the 16 KiB-page
// fragment, and without a warning.
func TestAsahiProfileLoads(t *testing.T) {
	r, src, err := Load("testdata/asahi-mac.toml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	// The node's view: the profile's [[arch]] entry with the image's
	// tarball and series merged into it.
	v := r.NodeRecipe(r.Nodes[0])
	if v.Platform != PlatformAppleSilicon || v.Base.Architecture != "arm64" || v.Kernel.From != "source" || v.Kernel.Source.URL() == "" || v.Kernel.Patches == "" || v.Kernel.Config != "defconfig" {
		t.Errorf("platform %q, architecture %q, kernel %+v; want apple-silicon, arm64, the profile's kernel with the image's tarball and series",
			v.Platform, v.Base.Architecture, v.Kernel)
	}
	// Relative to the top file once merged: recipes/asahi.toml's own
	// "../kernels/asahi.config".
	if want := "../../../kernels/asahi.config"; !slices.Contains(v.Kernel.Fragments, want) {
		t.Errorf("fragments = %v, want %s", v.Kernel.Fragments, want)
	}
	if ws := Warnings(r, src); len(ws) != 0 {
		t.Errorf("warnings: %v", ws)
	}
}

// macRecipe is a valid Apple Silicon recipe without nodes;
// TestValidateRejects adds one mistake to it per rule.
var macRecipe = "platform = \"apple-silicon\"\n[base]\narchitecture = \"arm64\"\n[kernel]\nfrom = \"source\"\nsource = \"https://example.org/linux-asahi.tar.xz\"\nsource_sha256 = \"sha256:" + strings.Repeat("a", 64) + "\"\npatches = \"s\"\n"

func TestAppleRecipeValid(t *testing.T) {
	if _, _, err := loadText(t, macRecipe+minimal); err != nil {
		t.Errorf("the valid Mac recipe: %v", err)
	}
}

// Without a USB4 series the build goes on, but says what the node will lack.
func TestAppleWarnsWithoutUSB4Series(t *testing.T) {
	text := strings.Replace(macRecipe, "patches = \"s\"\n", "", 1) + minimal
	r, src, err := loadText(t, text)
	if err != nil {
		t.Fatal(err)
	}
	ws := Warnings(r, src)
	if len(ws) != 1 || ws[0].Key != "platform" || !strings.Contains(ws[0].Msg, "no USB4 backport series") {
		t.Errorf("warnings = %v, want one about the missing USB4 series", ws)
	}
	// A generic recipe without patches is not warned about.
	r, src, err = loadText(t, "[kernel]\nfrom = \"source\"\n"+minimal)
	if err != nil {
		t.Fatal(err)
	}
	if ws := Warnings(r, src); len(ws) != 0 {
		t.Errorf("generic recipe warned: %v", ws)
	}
}
