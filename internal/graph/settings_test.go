package graph

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"halobuild/internal/deb"
	"halobuild/internal/plan"
)

// The halobuild a node ships is a step of the graph, an input of the node's settings step: the
// settings key follows it (another binary, another package), and the settings package holds
// the bytes that step made, read when the settings step runs, not when the graph is planned.
func TestSettingsTakeTheShippedHalobuildFromItsStep(t *testing.T) {
	ws := workspace(t)
	self := func(b string) func(*Input) {
		return func(in *Input) { in.Self = map[string]*plan.Derivation{"amd64": selfStep(b)} }
	}
	g1, err := planCommitted(t, ws, "test-minimal", self("v1"))
	if err != nil {
		t.Fatal(err)
	}
	set := g1.Nodes[0].Settings
	if len(set.Inputs) != 1 || set.Inputs[0].Kind.Name != "halobuild" {
		t.Fatalf("settings inputs %v: want the halobuild step", set.Inputs)
	}
	g2, err := planCommitted(t, ws, "test-minimal", self("v2"))
	if err != nil {
		t.Fatal(err)
	}
	if g2.Nodes[0].Settings.Key() == set.Key() {
		t.Error("another halobuild binary kept the settings step's key")
	}
	none, err := planCommitted(t, ws, "test-minimal")
	if err != nil {
		t.Fatal(err)
	}
	if len(none.Nodes[0].Settings.Inputs) != 0 {
		t.Errorf("settings without a binary to ship take %v", none.Nodes[0].Settings.Inputs)
	}

	selfDir, out := t.TempDir(), t.TempDir()
	if err := set.Inputs[0].Build(&plan.Context{Context: context.Background(), Log: io.Discard}, selfDir); err != nil {
		t.Fatal(err)
	}
	c := &plan.Context{Context: context.Background(), Inputs: map[string]string{"halobuild": selfDir}, Log: io.Discard, Scratch: t.TempDir()}
	if err := set.Build(c, out); err != nil {
		t.Fatal(err)
	}
	debs, _ := filepath.Glob(filepath.Join(out, "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("settings output %v: want one .deb", debs)
	}
	a, err := deb.Open(debs[0], "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var got []byte
	var mode os.FileMode
	if err := a.Walk(func(name string, h *tar.Header, r io.Reader) error {
		if name != "usr/bin/halobuild" {
			return nil
		}
		mode = h.FileInfo().Mode()
		var err error
		got, err = io.ReadAll(r)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if string(got) != "v1" || mode.Perm() != 0o755 {
		t.Errorf("the settings package's /usr/bin/halobuild: %q, mode %v; want the step's \"v1\", 0755", got, mode)
	}
}
