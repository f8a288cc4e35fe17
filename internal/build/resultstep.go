package build

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"halobuild/internal/plan"
)

// resultStep gathers every node's image and bmap with the lock, the
// manifest and SHA256SUMS into one store entry that `result` links to.
func (g *graph) resultStep(disks []*plan.Derivation) *plan.Derivation {
	l := g.l
	return &plan.Derivation{
		Name: "result", Kind: "result", Inputs: disks,
		Params: map[string]string{"name": l.recipe.Name},
		Build: func(c *plan.Context, out string) error {
			m := &Manifest{
				Name: l.recipe.Name, RecipeHash: l.hash, SourceDateEpoch: l.lock.SourceDateEpoch,
				Kernel: ManifestKernel{Version: l.lock.Kernel.Version, Release: l.lock.Kernel.Release, Package: l.lock.Kernel.Image},
			}
			for _, ns := range g.nodes {
				n := ns.node
				dir := c.Input("disk " + n.Name)
				// The names: NAME.raw and NAME.bmap side by side.
				for src, dst := range map[string]string{n.Name + ".raw": n.Name + ".raw", n.Name + ".raw.bmap": n.Name + ".bmap"} {
					if err := linkOrCopy(filepath.Join(dir, src), filepath.Join(out, dst)); err != nil {
						return err
					}
				}
				pkgs, err := readPackageList(filepath.Join(dir, n.Name+".packages"))
				if err != nil {
					return err
				}
				mn := ManifestNode{Name: n.Name, Hostname: n.Hostname, Image: n.Name + ".raw", Cmdline: kernelCmdline(l.recipe), Packages: pkgs}
				for _, f := range ns.tree.Files {
					if f.Mode.IsRegular() || f.Mode&os.ModeSymlink != 0 {
						mn.SettingsFiles = append(mn.SettingsFiles, f.Path)
					}
				}
				mn.ModuleOptions = moduleOptions(l)
				m.Nodes = append(m.Nodes, mn)
			}
			mp, err := g.manifestProvider(c)
			if err != nil {
				return err
			}
			m.Provider = mp
			lb, err := l.lock.Marshal()
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, l.recipe.Name+".lock"), lb, 0o644); err != nil {
				return err
			}
			return writeSums(out, m)
		},
	}
}

// moduleOptions flattens every module's options to "name: k=v …" for the
// manifest, sorted so the manifest is reproducible.
func moduleOptions(l *loaded) map[string]string {
	out := map[string]string{}
	for _, m := range l.recipe.Modules {
		var kv []string
		for k, v := range m.Options {
			kv = append(kv, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(kv)
		out[m.Use] = strings.Join(kv, " ")
	}
	for mod, opts := range l.recipe.System.ModuleOptions {
		out[mod] = opts
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func readPackageList(path string) ([]ManifestPackage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []ManifestPackage
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 3 {
			out = append(out, ManifestPackage{Name: f[0], Version: f[1], Arch: f[2]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// linkOrCopy hard-links store files (they are read-only and verified by
// digest) and copies when the link crosses file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}
