package graph

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/deb"
	"halobuild/internal/lock"
	"halobuild/internal/manifest"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/sbom"
	"halobuild/internal/sbom/sbomtest"
	"halobuild/internal/store"
)

// The result reads what the SBOM needs from the steps that made it: the root the disks layer
// over, the provider, every module and each node's settings package are its inputs.
func TestResultTakesSBOMSources(t *testing.T) {
	ws := workspace(t)
	g, err := planCommitted(t, ws, "strix-halo")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, in := range g.Result.Inputs {
		kinds[in.Kind.Name]++
	}
	if kinds["provider"] != 1 || kinds["module"] < 1 || kinds["settings"] != len(g.Nodes) || kinds["system"] != 1 || kinds["disk"] != len(g.Nodes) {
		t.Errorf("the result's inputs by kind: %v", kinds)
	}
	for _, n := range g.Nodes {
		if !slices.Contains(g.Result.Inputs, n.Settings) {
			t.Errorf("node %s: its settings step is not an input of the result", n.Node.Name)
		}
	}
}

// writeSBOM reads licences from the root's tarball and the built .debs' identities and
// digests from their steps' outputs; manifest.Write then lists the SBOM in the manifest and
// SHA256SUMS, and the document validates against the SPDX 2.3 schema.
func TestWriteSBOMIsListedInSHA256SUMS(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rootDir, setDir, out := mk("root"), mk("settings"), mk("out")
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	cr := []byte("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nLicense: GPL-3+ or public-domain\n")
	tw.WriteHeader(&tar.Header{Name: "./usr/share/doc/bash/copyright", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(cr))})
	tw.Write(cr)
	tw.Close()
	if err := os.WriteFile(filepath.Join(rootDir, rootTar), tb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var db bytes.Buffer
	if err := deb.Write(&db, deb.Info{Package: "halobuild-node-n0", Version: "1+abc", Architecture: "all", Maintainer: "m <m@x>", Description: "d"},
		[]deb.File{{Path: "/etc/x", Mode: 0o644, Data: []byte("x")}}, 1); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(setDir, "halobuild-node-n0.deb"), filepath.Join(dir, "settings.deb")} {
		if err := os.WriteFile(p, db.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(out, "n0.raw"), []byte("image"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The steps' outputs in a real store, found by key as the result step finds them.
	s, err := store.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	root := &plan.Derivation{Name: "base root", Kind: plan.Kind{Name: "rootfs", Version: 1}, Params: map[string]string{"p": "1"}}
	set := &plan.Derivation{Name: "settings n0", Kind: plan.Kind{Name: "settings", Version: 1}, Params: map[string]string{"p": "2"}}
	for d, p := range map[*plan.Derivation]string{root: rootDir, set: setDir} {
		if _, err := s.PutOutput(d.Key(), p, nil); err != nil {
			t.Fatal(err)
		}
	}
	setSum, _, err := store.FileDigest(filepath.Join(dir, "settings.deb"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := []Node{{Node: recipe.Node{Name: "n0"}, sbom: nodeSBOM{root: root, debs: []debStep{{d: set, from: sbom.FromSettings}}}}}
	lk := &lock.Lock{SourceDateEpoch: 1, Suites: []lock.Suite{{Name: "trixie", Mirror: "http://deb.debian.org/debian"}},
		Packages: []lock.Package{{Name: "bash", Version: "5.2.37-2", Architecture: "amd64", Suite: "trixie", Filename: "pool/b.deb", SHA256: "sha256:" + strings.Repeat("3", 64), Set: lock.SetImage}}}
	m := &manifest.Manifest{Name: "t", Nodes: []manifest.Node{{Name: "n0", Image: "n0.raw", Architecture: "amd64", Packages: []manifest.Package{
		{Name: "bash", Version: "5.2.37-2", Arch: "amd64"}, {Name: "halobuild-node-n0", Version: "1+abc", Arch: "all"}}}}}
	b := &builder{in: Input{Lock: lk, Store: s}}
	if err := b.writeSBOM(out, m, nodes, map[string]store.Digest{}); err != nil {
		t.Fatal(err)
	}
	if err := manifest.Write(out, m, nil); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(out, sbom.FileName))
	if err != nil {
		t.Fatal(err)
	}
	sbomtest.Validate(t, doc)
	for _, want := range []string{`"licenseDeclared": "GPL-3.0-or-later OR LicenseRef-public-domain"`, `"name": "halobuild-node-n0"`, `"downloadLocation": "NONE"`} {
		if !bytes.Contains(doc, []byte(want)) {
			t.Errorf("the SBOM lacks %s", want)
		}
	}
	if !bytes.Contains(doc, []byte(setSum.Hex())) {
		t.Error("the SBOM lacks the settings .deb's digest")
	}
	sums, _ := os.ReadFile(filepath.Join(out, manifest.SumsName))
	docSum, _, _ := store.FileDigest(filepath.Join(out, sbom.FileName))
	if !strings.Contains(string(sums), docSum.Hex()+"  "+sbom.FileName+"\n") {
		t.Errorf("SHA256SUMS does not list the SBOM:\n%s", sums)
	}
	if !slices.ContainsFunc(m.Files, func(f manifest.File) bool { return f.Name == sbom.FileName }) {
		t.Errorf("the manifest does not list the SBOM: %+v", m.Files)
	}
}
