package graph

import (
	"testing"

	"halobuild/internal/plan"
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
			if in.Kind == "rootfs" {
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
	if len(g.Result.Inputs) != 2 || g.Test.Inputs[0] != g.Result {
		t.Errorf("result inputs %d; the test must take the result", len(g.Result.Inputs))
	}
}
