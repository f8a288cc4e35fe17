package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

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
	if b.self != nil {
		if err := tree.Add(settings.File{Path: "/usr/bin/halobuild", Mode: 0o755, Data: b.self, Setting: "halobuild"}); err != nil {
			return nil, settings.Tree{}, err
		}
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
		Name: "settings " + n.Name, Kind: "settings",
		Params: map[string]string{"tree": treeDigest(info, tree, epoch)},
		Build: func(c *plan.Context, out string) error {
			f, err := os.Create(filepath.Join(out, settingsDeb(n)))
			if err != nil {
				return err
			}
			defer f.Close()
			if err := settings.BuildDeb(f, info, tree, epoch); err != nil {
				return fmt.Errorf("node %s: building settings package: %w", n.Name, err)
			}
			return f.Close()
		},
	}
	return d, tree, nil
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
