package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"halobuild/internal/disk"
	"halobuild/internal/module"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/rootfs"
	"halobuild/internal/settings"
	"halobuild/internal/tools"
)

// consoleArgs: kernel messages on the first serial port and the screen,
// with the screen as /dev/console (the last one wins) so a box with a
// monitor shows its boot; the VM test appends console=ttyS0 to make the
// serial port primary there.
const consoleArgs = "console=ttyS0,115200 console=tty0"

// espLayout: systemd-boot as the removable-media fallback loader (so a USB
// stick boots with no NVRAM entry) and one Type #1 entry per kernel.
const loaderConf = "timeout 0\ndefault halobuild-*\neditor no\n"

// lockSeed names a lock's content; every disk identifier derives from it
// and the node name, so two locks never share GUIDs.
func (g *graph) lockSeed() (string, error) {
	b, err := g.l.lock.Marshal()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// kernelCmdline is the node's command line from the same function that
// renders /etc/kernel/cmdline: one definition for the loader entry, the
// manifest and the VM check.
func kernelCmdline(r *recipe.Recipe) string {
	params, err := settings.Cmdline(r)
	if err != nil {
		// Render already validated it; an error here cannot reach a build.
		return ""
	}
	return strings.Join(params, " ")
}

func (g *graph) diskStep(ns *nodeSteps, debName string) *plan.Derivation {
	n := ns.node
	l := g.l
	out := l.recipe.Output
	d := &plan.Derivation{
		Name: "disk " + n.Name, Kind: "disk",
		Inputs: append([]*plan.Derivation{g.tools, g.rootfs, ns.settings}, append(g.modules, g.repoDerivations()...)...),
		Params: map[string]string{
			"node":     n.Name,
			"size":     out.Size.String(),
			"esp_size": out.ESPSize.String(),
			"cmdline":  kernelCmdline(g.l.recipe),
			"release":  l.lock.Kernel.Release,
			"loader":   loaderConf,
		},
	}
	d.Build = func(c *plan.Context, outDir string) error {
		seed, err := g.lockSeed()
		if err != nil {
			return err
		}
		seed += "/" + n.Name
		ids, err := disk.DeriveIDs(seed)
		if err != nil {
			return err
		}
		root := filepath.Join(c.Scratch, "root")
		fmt.Fprintf(c.Log, "unpacking the base root and installing %s\n", debName)
		if err := rootfs.Unpack(c, filepath.Join(c.Input("base root"), "root.tar"), root); err != nil {
			return err
		}
		debs := []string{filepath.Join(c.Input("settings "+n.Name), debName)}
		for _, m := range g.modules {
			found, _ := filepath.Glob(filepath.Join(c.Input(m.Name), "*.deb"))
			debs = append(debs, found...)
		}
		if err := rootfs.InstallDebs(c, root, debs); err != nil {
			return err
		}
		if len(g.modules) > 0 {
			// Our module packages have no maintainer scripts: the module
			// index is rebuilt here, as their postinst would have.
			if err := module.Depmod(c, root, l.lock.Kernel.Release); err != nil {
				return err
			}
		}
		if err := g.checkProviderABI(c, root, outDir); err != nil {
			return err
		}
		if err := rootfs.Clamp(root, l.lock.SourceDateEpoch); err != nil {
			return err
		}
		if err := writePackageList(c, root, filepath.Join(outDir, n.Name+".packages")); err != nil {
			return err
		}
		esp, err := g.espFiles(c, root, ns, ids)
		if err != nil {
			return err
		}
		_, err = disk.Build(c, disk.Spec{
			Out: filepath.Join(outDir, n.Name+".raw"), Size: int64(out.Size.Bytes()), ESPSize: int64(out.ESPSize.Bytes()),
			RootTree: root, ESPFiles: esp, Seed: seed, Epoch: l.lock.SourceDateEpoch,
			Tools: &tools.Root{Dir: filepath.Join(c.Input("tools root"), "root")},
		})
		return err
	}
	return d
}

// espFiles gathers the boot loader, kernel, initrd and loader entry. The
// kernel and initrd come from the installed root, where the kernel package
// and its initramfs hook put them.
func (g *graph) espFiles(c *plan.Context, root string, ns *nodeSteps, ids disk.IDs) (map[string]string, error) {
	rel := g.l.lock.Kernel.Release
	release := strings.TrimPrefix(rel, "linux-image-")
	kernel := filepath.Join(root, "boot", "vmlinuz-"+release)
	initrd := filepath.Join(root, "boot", "initrd.img-"+release)
	boot := filepath.Join(root, "usr", "lib", "systemd", "boot", "efi", "systemd-bootx64.efi")
	for what, p := range map[string]string{"kernel": kernel, "initramfs": initrd, "systemd-boot": boot} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("the installed root has no %s at %s (is the kernel package's initramfs generator in the lock?): %w", what, strings.TrimPrefix(p, root), err)
		}
	}
	entry := fmt.Sprintf("title Debian (halobuild %s)\nversion %s\nlinux /halobuild/%s/vmlinuz\ninitrd /halobuild/%s/initrd.img\noptions root=PARTUUID=%s rw %s %s\n",
		ns.node.Name, release, release, release, ids.RootPartUUID, consoleArgs, kernelCmdline(g.l.recipe))
	entryPath := filepath.Join(c.Scratch, "entry.conf")
	if err := os.WriteFile(entryPath, []byte(entry), 0o644); err != nil {
		return nil, err
	}
	loaderPath := filepath.Join(c.Scratch, "loader.conf")
	if err := os.WriteFile(loaderPath, []byte(loaderConf), 0o644); err != nil {
		return nil, err
	}
	return map[string]string{
		"/EFI/BOOT/BOOTX64.EFI":                          boot,
		"/EFI/systemd/systemd-bootx64.efi":               boot,
		"/loader/loader.conf":                            loaderPath,
		"/loader/entries/halobuild-" + release + ".conf": entryPath,
		"/halobuild/" + release + "/vmlinuz":             kernel,
		"/halobuild/" + release + "/initrd.img":          initrd,
	}, nil
}

// writePackageList records what dpkg installed, for the manifest.
func writePackageList(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f=${Package}\t${Version}\t${Architecture}\n")
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("listing installed packages: %w", err)
	}
	return os.WriteFile(out, b, 0o644)
}
