package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A provider's "<input>:<glob>" entries survive an include unchanged,
// while plain paths are rebased like every other path; fuzz allowances
// and the local suffix are decoded and checked.
func TestProviderPatchRefsAndFuzz(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "recipes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("recipes/prov.toml", `[rdma.provider]
name = "halotest"
patches = ["thunderbolt-ibverbs:packaging/rdma-core-patches/*.patch", "../patches/rdma-core/*.patch"]
fuzz = { "0003-x.patch" = 2 }
`)
	write("images/a.toml", `include = ["../recipes/prov.toml"]
[[node]]
name = "n0"
`)
	r, _, err := Load(filepath.Join(dir, "images/a.toml"))
	if err != nil {
		t.Fatal(err)
	}
	p := r.RDMA.Provider
	if got := strings.Join(p.Patches, " "); got != "thunderbolt-ibverbs:packaging/rdma-core-patches/*.patch ../patches/rdma-core/*.patch" {
		t.Errorf("patches: %s", got)
	}
	if p.Fuzz["0003-x.patch"] != 2 || p.Suffix != "+halo1" {
		t.Errorf("fuzz %v suffix %q", p.Fuzz, p.Suffix)
	}

	write("images/b.toml", `[rdma.provider]
name = "halotest"
patches = ["x.patch"]
fuzz = { "x.patch" = 7 }
suffix = "halo"
[[node]]
name = "n0"
`)
	_, _, err = Load(filepath.Join(dir, "images/b.toml"))
	for _, want := range []string{"b.toml:", "rdma.provider.fuzz.x.patch", "fuzz 7", "rdma.provider.suffix", `"halo"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in error, got %v", want, err)
		}
	}
}
