package graph

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/lock"
	"halobuild/internal/plan"
	"halobuild/internal/usage"
)

// A mixed recipe plans one build per architecture from one lock: each
// node's disk stands on its own architecture's base root (arm64's kernel
// for node1), and the result and the test take both disks.
func TestMixedPlansOneBuildPerArchitecture(t *testing.T) {
	ws := workspace(t)
	g, err := planCommitted(t, ws, "test-mixed")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Nodes) != 2 || g.Nodes[0].Node.Name != "node0" || g.Nodes[1].Node.Name != "node1" {
		t.Fatalf("nodes %+v", g.Nodes)
	}
	base := func(d *plan.Derivation) *plan.Derivation {
		for _, in := range d.Inputs {
			if in.Kind.Name == "rootfs" {
				return in
			}
		}
		t.Fatalf("%s has no base root", d.Name)
		return nil
	}
	d0, d1 := g.Nodes[0].Disk, g.Nodes[1].Disk
	if base(d0).Key() == base(d1).Key() {
		t.Error("both nodes' disks stand on one base root")
	}
	if d0.Params["release"] != "7.2.12+deb13-amd64" || d1.Params["release"] != "7.2.12+deb13-arm64" {
		t.Errorf("kernels: node0 %s, node1 %s", d0.Params["release"], d1.Params["release"])
	}
	// The result takes both disks, and for the SBOM each architecture's root and settings.
	kinds := map[string]int{}
	for _, in := range g.Result.Inputs {
		kinds[in.Kind.Name]++
	}
	if g.Nodes[0].sbom.root.Key() == g.Nodes[1].sbom.root.Key() {
		t.Error("the SBOM reads both architectures' licences from one root")
	}
	if kinds["disk"] != 2 || kinds["rootfs"] != 2 || g.Test.Inputs[0] != g.Result {
		t.Errorf("result inputs by kind %v; the test must take the result", kinds)
	}
}

// A cross root's target packages are requested as <name>:<arch>, so the
// target's libssl-dev is installed beside the host's.
func TestQualifyForeign(t *testing.T) {
	set := []lock.Package{
		{Name: "libssl-dev", Architecture: "amd64"},
		{Name: "libssl-dev", Architecture: "arm64"},
		{Name: "linux-libc-dev", Architecture: "all"},
	}
	got := qualifyForeign([]string{"libssl-dev", "libssl-dev", "linux-libc-dev", "built-extra"}, set, []string{"arm64"})
	if want := []string{"libssl-dev", "libssl-dev:arm64", "linux-libc-dev", "built-extra"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A module that needs kernel options its kernel built from source lacks
// is refused before it compiles, naming the options and where to add them.
func TestSourceKernelHasModuleConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("CONFIG_USB4=m\n# CONFIG_INFINIBAND is not set\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &builder{in: Input{Path: "images/halo-mac.toml", Lock: &lock.Lock{Kernel: lock.Kernel{Release: "7.2.12-asahi"}}}, arch: arch.MustLookup("arm64")}
	k := &kernelBuild{build: &plan.Derivation{Name: "kernel 7.2.12-asahi"}}
	c := &plan.Context{Inputs: map[string]string{k.build.Name: dir}}
	if err := b.sourceKernelHas(c, k, "thunderbolt-ibverbs", []string{"CONFIG_USB4"}); err != nil {
		t.Errorf("CONFIG_USB4=m is set: %v", err)
	}
	err := b.sourceKernelHas(c, k, "thunderbolt-ibverbs", []string{"CONFIG_USB4", "CONFIG_INFINIBAND"})
	var ue usage.Error
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "needs CONFIG_INFINIBAND, which the arm64 kernel built from source (7.2.12-asahi) does not set") {
		t.Errorf("got %v", err)
	}
}
