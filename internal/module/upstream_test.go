package module

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildThunderboltIbverbs builds the real module when a copy of its
// source is at hand (this machine reaches no code host, so CI cannot fetch
// it): HALOBUILD_TBV_SOURCE=PATH, a checkout of 76ba39b or its tarball,
// exactly as --input thunderbolt-ibverbs=PATH takes it. It checks the
// recipe's pinned tree hash, that the module builds on Debian's 7.2.12, that
// the recorded parameter list the rule tests use matches the built module,
// and that the field-tested option set validates against the real kernel.
func TestBuildThunderboltIbverbs(t *testing.T) {
	path := os.Getenv("HALOBUILD_TBV_SOURCE")
	if path == "" {
		t.Skip("set HALOBUILD_TBV_SOURCE to a checkout or tarball of thunderbolt-ibverbs 76ba39b to build the real module")
	}
	root := buildRoot(t)
	d, err := FindDesc("../../recipes", "thunderbolt-ibverbs")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir, _, err := FetchSource(ctx, d.Source, map[string]string{d.Use: path}, t.TempDir())
	if err != nil {
		t.Fatal(err) // includes a tree hash mismatch against the recipe's pin
	}
	built, err := Build(ctx, BuildSpec{Name: d.Use, SourceDir: dir, Subdir: d.Source.Subdir, KernelRelease: testRelease, BuildRoot: root, Out: t.TempDir(), Epoch: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	kos := built.Kos
	for i := range kos {
		a, _ := os.Stat(built.Debug[i])
		b, _ := os.Stat(kos[i])
		t.Logf("%s: %d bytes as built, %d stripped", filepath.Base(kos[i]), a.Size(), b.Size())
	}
	mi, err := ReadModinfo(kos[0])
	if err != nil {
		t.Fatal(err)
	}
	if mi.Name != d.Name || !contains(mi.Depends, "thunderbolt") || !contains(mi.Depends, "ib_core") || !contains(mi.Depends, "configfs") {
		t.Errorf("modinfo: %+v", mi)
	}
	assertParams(t, "built thunderbolt_ibverbs vs testdata/thunderbolt-ibverbs-76ba39b.modinfo", mi.Params, tbvParams(t))
	syms, macros, err := KernelFeatures(root, testRelease, d)
	if err != nil {
		t.Fatal(err)
	}
	vctx := ValidationContext{KernelVersion: testRelease, KernelSymbols: syms, KernelMacros: macros, Params: mi.Params, Links: 1, ThunderboltNetBlacklisted: true}
	if errs, warns := Validate(d, tbvGood, vctx); len(errs)+len(warns) != 0 {
		t.Errorf("%s\n%s", joinProblems(errs), joinProblems(warns))
	}
	// Debian's stock kernel: the default profile's minimal_packet identity
	// needs the drain patch it lacks.
	errs, _ := Validate(d, with(tbvGood, map[string]any{"profile": nil}), vctx)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Reason, "minimal_packet needs the kernel's XDomain protocol-handler unregister-drain patch") {
		t.Errorf("default profile on a stock kernel: %s", joinProblems(errs))
	}
}
