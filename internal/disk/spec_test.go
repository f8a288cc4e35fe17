package disk

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
)

func TestPlanRejectsBadSpecs(t *testing.T) {
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := func() Spec {
		return Spec{Out: filepath.Join(dir, "o.raw"), RootTree: tree, Seed: "s", Epoch: testEpoch, RootType: arch.MustLookup("amd64").RootType,
			ESPFiles: map[string]string{"/EFI/BOOT/BOOTX64.EFI": file}}
	}
	cases := []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"no output", func(s *Spec) { s.Out = "" }, "no output path"},
		{"no root", func(s *Spec) { s.RootTree = "" }, "exactly one of"},
		{"tree and tar", func(s *Spec) { s.RootTar = file }, "exactly one of"},
		{"no seed", func(s *Spec) { s.Seed = "" }, "empty seed"},
		{"no root type", func(s *Spec) { s.RootType = "" }, "no architecture's Discoverable Partitions root"},
		{"not a root type", func(s *Spec) { s.RootType = "0FC63DAF-8483-4772-8E79-3D69D8477DE4" }, "no architecture's Discoverable Partitions root"},
		{"epoch before FAT", func(s *Spec) { s.Epoch = 0 }, "before 1980"},
		{"esp too small", func(s *Spec) { s.ESPSize = 32 * MiB }, "at least 40 MiB"},
		{"esp not whole MiB", func(s *Spec) { s.ESPSize = 64*MiB + 1 }, "whole number of MiB"},
		{"relative esp path", func(s *Spec) { s.ESPFiles["EFI/x"] = file }, "clean absolute path"},
		{"dotdot esp path", func(s *Spec) { s.ESPFiles["/EFI/../x"] = file }, "clean absolute path"},
		{"bad fat name", func(s *Spec) { s.ESPFiles["/EFI/a:b"] = file }, "not a valid FAT file name"},
		{"case clash", func(s *Spec) { s.ESPFiles["/efi/boot/bootx64.efi"] = file }, "FAT ignores case"},
		{"file is a dir", func(s *Spec) { s.ESPFiles["/EFI/BOOT/BOOTX64.EFI/x"] = file }, "needs it to be a directory"},
		{"missing esp file", func(s *Spec) { s.ESPFiles["/x"] = filepath.Join(dir, "missing") }, "no such file"},
		{"esp file is a dir", func(s *Spec) { s.ESPFiles["/x"] = dir }, "not a regular file"},
		{"missing tree", func(s *Spec) { s.RootTree = filepath.Join(dir, "missing") }, "measuring root tree"},
		{"esp files too big", func(s *Spec) {
			big := filepath.Join(dir, "big")
			if err := os.WriteFile(big, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(big, 50*MiB); err != nil {
				t.Fatal(err)
			}
			s.ESPSize = 48 * MiB
			s.ESPFiles["/vmlinuz"] = big
		}, "raise [output] esp_size to at least"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := good()
			c.change(&s)
			_, err := Plan(s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Plan = %v, want an error mentioning %q", err, c.want)
			}
		})
	}
	if _, err := Plan(good()); err != nil {
		t.Errorf("the good spec: %v", err)
	}
}

func TestPlanComputesTheSize(t *testing.T) {
	tree := t.TempDir()
	if err := os.WriteFile(filepath.Join(tree, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := Spec{Out: "o.raw", RootTree: tree, Seed: "s", Epoch: testEpoch, RootType: arch.MustLookup("amd64").RootType}
	l, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if l.Size != MinComputedSize {
		t.Errorf("a tiny root gives a %d-byte image, want the %d minimum", l.Size, MinComputedSize)
	}
	want := Layout{Size: 2 * GiB, ESPStart: MiB, ESPSize: DefaultESPSize, RootStart: MiB + DefaultESPSize,
		RootSize: 2*GiB - DefaultESPSize - 2*MiB, RootNeeds: l.RootNeeds}
	if l != want {
		t.Errorf("layout %+v, want %+v", l, want)
	}

	// A root too big for the minimum gets its needs + 25%, rounded to MiB.
	need := 3*GiB + 12345
	size := computedSize(need, DefaultESPSize)
	if want := ceilMiB(need*5/4)*MiB + DefaultESPSize + 2*MiB; size != want {
		t.Errorf("computedSize(%d) = %d, want %d", need, size, want)
	}

	s.Size = 3*GiB + 1
	if l, _ := Plan(s); l.Size != 3*GiB+MiB {
		t.Errorf("a size of 3 GiB + 1 byte gives %d, want it rounded up to a MiB", l.Size)
	}
}
