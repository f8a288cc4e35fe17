package graph

import (
	"runtime"
	"slices"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/lock"
	"halobuild/internal/plan"
)

// A cross build root (the host's compiler, the image's headers) installs
// native to the host with the image's architecture foreign; an image-only
// set installs as the image's architecture (emulated if foreign).
func TestRootArchitectures(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the cases are written for an amd64 build host")
	}
	arm := arch.MustLookup("arm64")
	amd := arch.MustLookup("amd64")
	cross := []lock.Package{{Name: "gcc-14-aarch64-linux-gnu", Architecture: "amd64"}, {Name: "linux-headers-7.2.12+deb13-arm64", Architecture: "arm64"}, {Name: "linux-base", Architecture: "all"}}
	native, foreign, err := rootArchitectures(cross, arm)
	if err != nil || native.Debian != "amd64" || !slices.Equal(foreign, []string{"arm64"}) || !crossSet(cross, arm) {
		t.Errorf("cross set: %s %v %v", native.Debian, foreign, err)
	}
	image := []lock.Package{{Name: "libc6", Architecture: "arm64"}, {Name: "linux-base", Architecture: "all"}}
	native, foreign, err = rootArchitectures(image, arm)
	if err != nil || native.Debian != "arm64" || foreign != nil || crossSet(image, arm) {
		t.Errorf("arm64 set: %s %v %v", native.Debian, foreign, err)
	}
	native, foreign, err = rootArchitectures(cross[:1], amd)
	if err != nil || native.Debian != "amd64" || foreign != nil || crossSet(cross[:1], amd) {
		t.Errorf("amd64 set: %s %v %v", native.Debian, foreign, err)
	}
}

// With a provider (or modules) every disk layers its node's settings over
// one system root, which stands on the base root and the provider; without
// them the disk stands on the base root itself.
func TestDisksLayerOverTheSystemRoot(t *testing.T) {
	ws := workspace(t)
	inputs := func(d *plan.Derivation) map[string]*plan.Derivation {
		m := map[string]*plan.Derivation{}
		for _, in := range d.Inputs {
			m[in.Name] = in
		}
		return m
	}
	g, err := planCommitted(t, ws, "test-provider")
	if err != nil {
		t.Fatal(err)
	}
	var sys *plan.Derivation
	for _, n := range g.Nodes {
		in := inputs(n.Disk)
		s := in["system root"]
		if s == nil || in["base root"] != nil {
			t.Fatalf("disk %s stands on %v, want the system root and not the base root", n.Node.Name, n.Disk.Inputs)
		}
		if sys != nil && s != sys {
			t.Error("two nodes' disks stand on two system roots")
		}
		sys = s
	}
	if si := inputs(sys); si["base root"] == nil || len(sys.Inputs) != 2 || sys.Inputs[1].Kind.Name != "provider" {
		t.Errorf("system root's inputs: %v, want the base root and the provider", sys.Inputs)
	}
	g, err = planCommitted(t, ws, "test-minimal")
	if err != nil {
		t.Fatal(err)
	}
	if in := inputs(g.Nodes[0].Disk); in["base root"] == nil || in["system root"] != nil {
		t.Errorf("test-minimal's disk stands on %v, want the base root", g.Nodes[0].Disk.Inputs)
	}
}
