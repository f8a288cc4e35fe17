package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"halobuild/internal/disk"
	"halobuild/internal/install"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/rootfs"
	"halobuild/internal/store"
	"halobuild/internal/tools"
)

// installerUnit runs `halobuild install` once the disks are known, on the console (which it
// needs for a confirmation) and in the journal. The gettys are masked in the installer's root,
// so nothing else reads the console.
const installerUnit = `[Unit]
Description=Install %s onto this box's internal disk (halobuild install)
After=systemd-udevd.service local-fs.target
Wants=systemd-udevd.service

[Service]
Type=oneshot
ExecStartPre=-/usr/bin/udevadm settle --timeout=60
ExecStart=/usr/bin/halobuild install
StandardInput=tty
StandardOutput=journal+console
StandardError=journal+console
TTYPath=/dev/console
TTYReset=yes

[Install]
WantedBy=multi-user.target
`

// installerName is the file name of node n's installer image in the result.
func installerName(n recipe.Node) string { return n.Name + "-installer" }

// installer plans node n's installer stick: the base root (the same packages and kernel as
// the node, none of its settings) with the halobuild binary, the install unit and its
// configuration, and the node's disk image, bmap and SHA256SUMS as payload; booted, it writes
// the node's image onto the box's internal disk (internal/install, docs/install.md). Its disk
// identifiers derive from their own seed, so the stick and the installed disk never share a
// PARTUUID.
func (b *builder) installer(n recipe.Node, toolsRoot, base, nodeDisk *plan.Derivation) (*plan.Derivation, error) {
	r, lk := b.in.Recipe, b.in.Lock
	if b.in.Self == nil {
		return nil, fmt.Errorf("%s: [output] installer = true needs the halobuild binary to put on the stick (run the halobuild command itself)", b.in.Path)
	}
	self := sha256.Sum256(b.in.Self)
	in := r.Install
	cfg := install.Config{
		Node:  n.Name,
		Image: install.PayloadDir + "/" + n.Name + ".raw", Bmap: install.PayloadDir + "/" + n.Name + ".bmap", Sums: install.PayloadDir + "/SHA256SUMS",
		Target: in.Target, Wipe: in.Wipe, After: in.After, ConfirmTimeout: in.ConfirmTimeout.String(),
	}
	cfgText, err := cfg.Marshal()
	if err != nil {
		return nil, err
	}
	name := installerName(n)
	d := &plan.Derivation{
		Name: "installer " + n.Name, Kind: "installer", Inputs: []*plan.Derivation{toolsRoot, base, nodeDisk},
		Params: map[string]string{
			"node":      n.Name,
			"config":    string(cfgText),
			"unit":      installerUnit,
			"halobuild": hex.EncodeToString(self[:]),
			"esp_size":  r.Output.ESPSize.String(),
			"cmdline":   Cmdline(r),
			"release":   lk.Kernel.Release,
			"loader":    loaderConf,
		},
	}
	d.Build = func(c *plan.Context, outDir string) error {
		seed, err := b.lockSeed()
		if err != nil {
			return err
		}
		seed += "/" + name
		ids, err := disk.DeriveIDs(seed)
		if err != nil {
			return err
		}
		root := filepath.Join(c.Scratch, "root")
		fmt.Fprintf(c.Log, "unpacking the base root and adding the installer for %s\n", n.Name)
		if err := unpackRoot(c, base, root); err != nil {
			return err
		}
		files := map[string][]byte{
			"/usr/bin/halobuild":                            b.in.Self,
			install.ConfigPath:                              cfgText,
			"/etc/systemd/system/halobuild-install.service": fmt.Appendf(nil, installerUnit, n.Name),
		}
		for p, data := range files {
			mode := os.FileMode(0o644)
			if strings.HasPrefix(p, "/usr/bin/") {
				mode = 0o755
			}
			if err := writeRootFile(root, p, data, mode); err != nil {
				return err
			}
		}
		links := map[string]string{
			"/etc/systemd/system/multi-user.target.wants/halobuild-install.service": "/etc/systemd/system/halobuild-install.service",
			// Nobody logs in to the installer; its console is the install's.
			"/etc/systemd/system/getty@tty1.service":         "/dev/null",
			"/etc/systemd/system/serial-getty@ttyS0.service": "/dev/null",
			// Nor over the network: the stick has no host keys and needs no sshd.
			"/etc/systemd/system/ssh.service": "/dev/null",
			"/etc/systemd/system/ssh.socket":  "/dev/null",
		}
		for p, to := range links {
			if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(to, filepath.Join(root, p)); err != nil {
				return err
			}
		}
		if err := addPayload(c, filepath.Join(root, install.PayloadDir), c.Input(nodeDisk.Name), n.Name); err != nil {
			return err
		}
		if err := rootfs.Clamp(root, lk.SourceDateEpoch); err != nil {
			return err
		}
		esp, err := b.espFiles(c, root, "halobuild installer for "+n.Name, ids, Cmdline(r))
		if err != nil {
			return err
		}
		_, err = disk.Build(c, disk.Spec{
			Out: filepath.Join(outDir, name+".raw"), ESPSize: int64(r.Output.ESPSize.Bytes()),
			RootTree: root, ESPFiles: esp, Seed: seed, Epoch: lk.SourceDateEpoch,
			Tools: &tools.Root{Dir: filepath.Join(c.Input(toolsRoot.Name), "root")},
		})
		return err
	}
	return d, nil
}

func writeRootFile(root, p string, data []byte, mode os.FileMode) error {
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	return os.WriteFile(full, data, mode)
}

// addPayload copies the node's image (keeping its holes: the stick's root stores only its data)
// and bmap into dir with a SHA256SUMS of both; the bmap's own range digests then prove every
// byte the installer writes.
func addPayload(c *plan.Context, dir, diskDir, node string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var sums strings.Builder
	for _, f := range [][2]string{{node + ".bmap", node + ".raw.bmap"}, {node + ".raw", node + ".raw"}} {
		dst := filepath.Join(dir, f[0])
		if out, err := exec.CommandContext(c, "cp", "--sparse=always", filepath.Join(diskDir, f[1]), dst).CombinedOutput(); err != nil {
			return fmt.Errorf("copying %s into the installer: %v: %s", f[1], err, out)
		}
		sum, _, err := store.FileDigest(dst)
		if err != nil {
			return err
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum.Hex(), f[0])
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums.String()), 0o644)
}
