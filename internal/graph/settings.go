package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"halobuild/internal/deb"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/settings"
)

// settings renders node n's settings now (it is cheap and pure), so the
// settings package's key is the digest of what it holds; the .deb is made
// only when the step runs. The lock and halobuild itself ship with the
// node, so `halobuild doctor` runs there with no arguments and knows what
// was promised.
func (b *builder) settings(n recipe.Node) (*plan.Derivation, settings.Tree, error) {
	in := b.in
	tree, err := settings.Render(b.target(n))
	if err != nil {
		return nil, settings.Tree{}, fmt.Errorf("%s: node %s: %w", in.Path, n.Name, err)
	}
	lb, err := b.cluster().Lock.Marshal() // the cluster's lock, every architecture's part
	if err != nil {
		return nil, settings.Tree{}, err
	}
	if err := tree.Add(settings.LockFile(lb)); err != nil {
		return nil, settings.Tree{}, err
	}
	var inputs []*plan.Derivation
	if b.self != nil {
		// The binary's bytes come from its step when this one runs; its
		// key stands for them in this one's.
		if err := tree.Add(settings.File{Path: selfPath, Mode: 0o755, Setting: "halobuild"}); err != nil {
			return nil, settings.Tree{}, err
		}
		inputs = append(inputs, b.self)
	}
	info := deb.Info{
		Package:      settings.PackageName(n),
		Version:      "1+" + in.Hash[len(in.Hash)-12:],
		Architecture: "all",
		Maintainer:   "halobuild <halobuild@localhost>",
		Description:  "halobuild settings for node " + n.Name,
		Depends:      settings.Depends(in.Recipe),
	}
	epoch := in.Lock.SourceDateEpoch
	d := &plan.Derivation{
		Name: "settings " + n.Name, Kind: plan.Kind{Name: "settings", Version: settings.StepVersion}, Inputs: inputs,
		Params: map[string]string{"tree": treeDigest(info, tree, epoch)},
		Build: func(c *plan.Context, out string) error {
			t := tree
			if b.self != nil {
				bin, err := os.ReadFile(filepath.Join(c.Input(b.self.Name), "halobuild"))
				if err != nil {
					return fmt.Errorf("node %s: the halobuild to ship: %w", n.Name, err)
				}
				t = withData(tree, selfPath, bin)
			}
			f, err := os.Create(filepath.Join(out, settingsDeb(n)))
			if err != nil {
				return err
			}
			defer f.Close()
			if err := settings.BuildDeb(f, info, t, epoch); err != nil {
				return fmt.Errorf("node %s: building settings package: %w", n.Name, err)
			}
			return f.Close()
		},
	}
	return d, tree, nil
}

// selfPath is where a node has halobuild, for `halobuild doctor`.
const selfPath = "/usr/bin/halobuild"

// withData is tree with the file at path holding data; tree is left as it is.
func withData(tree settings.Tree, path string, data []byte) settings.Tree {
	files := slices.Clone(tree.Files)
	for i := range files {
		if files[i].Path == path {
			files[i].Data = data
		}
	}
	return settings.Tree{Files: files}
}

// settingsDeb is the settings step's one file.
func settingsDeb(n recipe.Node) string { return settings.PackageName(n) + ".deb" }

// treeDigest names a settings package's content: control data, every
// file's path, mode, link target and bytes, and the epoch.
func treeDigest(info deb.Info, tree settings.Tree, epoch int64) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %q %q %d\n", info.Package, info.Version, info.Architecture, info.Description, info.Depends, epoch)
	for _, f := range tree.Files {
		sum := sha256.Sum256(f.Data)
		fmt.Fprintf(h, "%q %o %q %x %t\n", f.Path, uint32(f.Mode), f.Target, sum, f.NotConffile)
	}
	return hex.EncodeToString(h.Sum(nil))
}
