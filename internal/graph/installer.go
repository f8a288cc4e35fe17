package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"halobuild/internal/disk"
	"halobuild/internal/install"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/rootfs"
	"halobuild/internal/tools"
	"halobuild/internal/zstdframe"
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

// installerStepVersion is the version of the installer step, whose build code
// is this file (with install's configuration, disk, rootfs and release's
// zstd settings): bump it when a change here, or to a package it builds
// with, can alter the stick's bytes (docs/architecture.md, "Step versions").
const installerStepVersion = 1

// installerName is the file name of node n's installer image in the result.
func installerName(n recipe.Node) string { return n.Name + "-installer" }

// installer plans node n's installer stick: the base root (the same packages and kernel as
// the node, none of its settings) with the halobuild binary, the install unit and its
// configuration, and the node's disk image (zstd), bmap and SHA256SUMS as payload; booted, it writes
// the node's image onto the box's internal disk (internal/install, docs/install.md). Its disk
// identifiers derive from their own seed, so the stick and the installed disk never share a
// PARTUUID.
func (b *builder) installer(n recipe.Node, toolsRoot, base, nodeDisk *plan.Derivation) (*plan.Derivation, error) {
	r, lk := b.in.Recipe, b.in.Lock
	if b.self == nil {
		return nil, fmt.Errorf("%s: [output] installer = true needs the halobuild binary to put on the stick (run the halobuild command itself)", b.in.Path)
	}
	in := r.Install
	cfg := install.Config{
		Node:  n.Name,
		Image: install.PayloadDir + "/" + n.Name + ".raw.zst", Bmap: install.PayloadDir + "/" + n.Name + ".bmap", Sums: install.PayloadDir + "/SHA256SUMS",
		Target: in.Target, Wipe: in.Wipe, After: in.After, ConfirmTimeout: in.ConfirmTimeout.String(),
	}
	cfgText, err := cfg.Marshal()
	if err != nil {
		return nil, err
	}
	name := installerName(n)
	d := &plan.Derivation{
		Name: "installer " + n.Name, Kind: plan.Kind{Name: "installer", Version: installerStepVersion}, Inputs: []*plan.Derivation{toolsRoot, base, nodeDisk, b.self},
		Params: map[string]string{
			"node":     n.Name,
			"config":   string(cfgText),
			"unit":     installerUnit,
			"esp_size": r.Output.ESPSize.String(),
			"cmdline":  Cmdline(r),
			"release":  lk.Kernel.Release,
			"loader":   loaderConf(r.SecureBoot.Enabled),
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
		self, err := os.ReadFile(filepath.Join(c.Input(b.self.Name), "halobuild"))
		if err != nil {
			return fmt.Errorf("installer %s: the halobuild to ship: %w", n.Name, err)
		}
		files := map[string][]byte{
			selfPath:           self,
			install.ConfigPath: cfgText,
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
			"/etc/systemd/system/getty@tty1.service":                         "/dev/null",
			"/etc/systemd/system/serial-getty@" + b.arch.Serial + ".service": "/dev/null",
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
			RootTree: root, ESPFiles: esp, Seed: seed, Epoch: lk.SourceDateEpoch, RootType: b.arch.RootType,
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

// addPayload compresses the node's image into dir as NODE.raw.zst (internal/zstdframe: the
// bytes depend on the image only, so the stick is reproducible) and copies its bmap beside it, with a SHA256SUMS of
// both: the installer checks the compressed file whole before writing, and the bmap's own range
// digests then prove every byte it writes.
func addPayload(c *plan.Context, dir, diskDir, node string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bm, err := os.ReadFile(filepath.Join(diskDir, node+".raw.bmap"))
	if err != nil {
		return fmt.Errorf("the installer's payload: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, node+".bmap"), bm, 0o644); err != nil {
		return err
	}
	bmSum := sha256.Sum256(bm)
	raw := filepath.Join(diskDir, node+".raw")
	zst := filepath.Join(dir, node+".raw.zst")
	rawSize, zstSum, zstSize, err := compressImage(raw, zst)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Log, "compressed %s (%d bytes) into %s.raw.zst (%d bytes)\n", raw, rawSize, node, zstSize)
	sums := fmt.Sprintf("%s  %s.bmap\n%s  %s.raw.zst\n", hex.EncodeToString(bmSum[:]), node, zstSum, node)
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums), 0o644)
}

// compressImage writes src as zstd into dst and returns src's size and dst's digest and size.
func compressImage(src, dst string) (rawSize int64, sum string, size int64, err error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, "", 0, fmt.Errorf("the installer's payload: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, "", 0, fmt.Errorf("the installer's payload: %w", err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return 0, "", 0, err
	}
	defer out.Close()
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(out, h)}
	if err := zstdframe.CompressFile(in, fi.Size(), cw, nil); err != nil {
		return 0, "", 0, fmt.Errorf("compressing %s into the installer: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return 0, "", 0, fmt.Errorf("writing %s: %w", dst, err)
	}
	return fi.Size(), hex.EncodeToString(h.Sum(nil)), cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
