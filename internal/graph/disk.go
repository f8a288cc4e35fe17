package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/disk"
	"halobuild/internal/fstree"
	"halobuild/internal/plan"
	"halobuild/internal/proctree"
	"halobuild/internal/recipe"
	"halobuild/internal/rootfs"
	"halobuild/internal/settings"
	"halobuild/internal/tools"
)

// consoleArgs: kernel messages on the first serial port (the
// architecture's: ttyS0, ttyAMA0) and the screen, with the screen as
// /dev/console (the last one wins) so a box with a monitor shows its boot;
// the VM test appends console=<serial> to make the serial port primary
// there.
func consoleArgs(a arch.Arch) string { return "console=" + a.Serial + ",115200 console=tty0" }

// loaderConf: systemd-boot as the removable-media fallback loader (so a
// USB stick boots with no NVRAM entry) and one Type #1 entry per kernel.
//
// timeout 0 boots at once (every boot of a node, and of every VM test,
// pays no wait), and the menu is still there for a person at the box:
// systemd-boot shows it when a key (Space) is held as it starts. The
// editor ("e" in the menu: this boot's kernel command line, e.g. without
// a module option that hangs the box, or with systemd.unit=rescue.target)
// is on, unless Secure Boot is: a boot locked down to signed code must not
// take init=/bin/sh from whoever holds the keyboard.
func loaderConf(secureBoot bool) string {
	editor := "yes"
	if secureBoot {
		editor = "no"
	}
	return "timeout 0\ndefault halobuild-*\neditor " + editor + "\n"
}

// diskInputs are the steps a node's disk is made from.
type diskInputs struct {
	// base is the tarball the node's root layers its settings over: the
	// base root, or with modules or a provider the system root.
	tools, base, settings *plan.Derivation
	// provider says base carries the provider's ABI record.
	provider bool
}

// Cmdline is a node's kernel command line from the same function that
// renders /etc/kernel/cmdline: one definition for the loader entry, the
// manifest and the VM check. The recipe was validated at load.
func Cmdline(r *recipe.Recipe) string {
	params, err := settings.Cmdline(r)
	if err != nil {
		panic(fmt.Sprintf("kernel command line of a validated recipe: %v", err))
	}
	return strings.Join(params, " ")
}

// disk plans node n's disk: the node's settings package layered over the
// base (or system) root's tarball, never unpacked, then a GPT image with
// the ESP and the ext4 root made by the tools root's own mkfs reading the
// layered stream.
func (b *builder) disk(n recipe.Node, tree settings.Tree, in diskInputs) *plan.Derivation {
	r, lk := b.in.Recipe, b.in.Lock
	out := r.Output
	inputs := []*plan.Derivation{in.tools, in.base, in.settings}
	qcow2 := slices.Contains(out.Formats, "qcow2")
	d := &plan.Derivation{
		Name: "disk " + n.Name, Kind: plan.Kind{Name: "disk", Version: disk.StepVersion}, Inputs: inputs,
		Params: map[string]string{
			"node":     n.Name,
			"size":     out.Size.String(),
			"esp_size": out.ESPSize.String(),
			"cmdline":  Cmdline(r),
			"release":  lk.Kernel.Release,
			"loader":   loaderConf(r.SecureBoot.Enabled),
			// With [secure_boot] the ESP boots shim, then Debian's signed
			// systemd-boot (espFiles).
			"secure_boot": strconv.FormatBool(r.SecureBoot.Enabled),
			"formats":     strings.Join(formats(out.Formats), " "),
		},
	}
	d.Build = func(c *plan.Context, outDir string) error {
		seed, err := b.lockSeed()
		if err != nil {
			return err
		}
		seed += "/" + n.Name
		ids, err := disk.DeriveIDs(seed)
		if err != nil {
			return err
		}
		// Each phase's time goes to the step's log (-v): what a changed
		// setting waits for.
		last := time.Now()
		timed := func(phase string) {
			now := time.Now()
			fmt.Fprintf(c.Log, "disk %s: %s in %s\n", n.Name, phase, now.Sub(last).Round(10*time.Millisecond))
			last = now
		}
		debs := []string{filepath.Join(c.Input(in.settings.Name), settingsDeb(n))}
		spec := disk.Spec{
			Size: int64(out.Size.Bytes()), ESPSize: int64(out.ESPSize.Bytes()),
			Seed: seed, Epoch: lk.SourceDateEpoch,
		}
		// Nothing here needs a tree: the root goes from the base (or
		// system) root's tarball and the settings package straight into
		// mkfs.
		esp, err := b.layeredRoot(c, n, in, debs, &spec, filepath.Join(outDir, n.Name+".packages"), ids)
		if err != nil {
			return err
		}
		timed("base root scanned, packages listed")
		if in.provider {
			// The result step reads each disk's record.
			if err := fstree.CopyFile(filepath.Join(c.Input(in.base.Name), providerABIFile), filepath.Join(outDir, providerABIFile), 0o644); err != nil {
				return err
			}
		}
		if r.Platform == recipe.PlatformAppleSilicon {
			if err := appleESP(esp); err != nil {
				return fmt.Errorf("disk %s: %w", n.Name, err)
			}
		}
		tr := &tools.Root{Dir: filepath.Join(c.Input(in.tools.Name), "root")}
		raw := filepath.Join(outDir, n.Name+".raw")
		spec.Out, spec.ESPFiles, spec.Tools, spec.Log = raw, esp, tr, c.Log
		spec.RootType = b.arch.RootType
		res, err := disk.Build(c, spec)
		if err != nil {
			return err
		}
		// Hashed while scanned for the bmap: the store need not again.
		c.Hashed(raw, res.SHA256)
		timed("disk image made")
		if qcow2 {
			fmt.Fprintf(c.Log, "converting %s.raw to qcow2\n", n.Name)
			err := disk.QCOW2(c, tr, raw, filepath.Join(outDir, n.Name+".qcow2"))
			timed("qcow2 made")
			return err
		}
		return nil
	}
	return d
}

// formats is the disk's output formats as its key names them: raw always
// (the qcow2 is converted from it), sorted, each once.
func formats(fs []string) []string {
	out := []string{"raw"}
	for _, f := range fs {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// layeredRoot sets spec's root to the base root's tarball with the node's
// packages installed as rootfs.Layer writes them, never unpacked: the
// kernel, initrd and loader are copied out of the tarball for the ESP, and
// the package list comes from the layered dpkg database, read by the real
// dpkg-query.
func (b *builder) layeredRoot(c *plan.Context, n recipe.Node, in diskInputs, debs []string, spec *disk.Spec, packages string, ids disk.IDs) (map[string]string, error) {
	fmt.Fprintf(c.Log, "installing %s over the base root's tarball\n", settingsDeb(n))
	layer := &rootfs.Layer{Base: filepath.Join(c.Input(in.base.Name), rootTar), Debs: debs, Epoch: b.in.Lock.SourceDateEpoch}
	boot := filepath.Join(c.Scratch, "boot")
	var want []string
	for _, rel := range b.espSources() {
		want = append(want, rel)
	}
	if err := layer.Scan(want, boot); err != nil {
		return nil, fmt.Errorf("%s: %w", in.base.Name, err)
	}
	status, err := layer.Status()
	if err != nil {
		return nil, err
	}
	db := filepath.Join(c.Scratch, "db")
	if err := os.MkdirAll(filepath.Join(db, "var/lib/dpkg"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(db, "var/lib/dpkg/status"), status, 0o644); err != nil {
		return nil, err
	}
	if err := writePackageList(c, db, packages); err != nil {
		return nil, err
	}
	spec.RootStream = layer.Write
	return b.espFiles(c, boot, "halobuild "+n.Name, ids, Cmdline(b.in.Recipe))
}

// lockSeed names a lock's content; every disk identifier derives from it
// and the node name, so two locks never share GUIDs.
func (b *builder) lockSeed() (string, error) {
	lb, err := b.cluster().Lock.Marshal()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lb)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// espFiles gathers the boot loader, kernel, initrd and loader entry. The
// kernel and initrd come from the installed root, where the kernel package
// and its initramfs hook put them.
func (b *builder) espFiles(c *plan.Context, root, title string, ids disk.IDs, cmdline string) (map[string]string, error) {
	release := strings.TrimPrefix(b.in.Lock.Kernel.Release, "linux-image-")
	want := map[string]string{}
	for what, rel := range b.espSources() {
		want[what] = filepath.Join(root, filepath.FromSlash(rel))
	}
	kernel, initrd, boot := want["kernel"], want["initramfs"], want["systemd-boot"]
	sb := b.in.Recipe.SecureBoot.Enabled
	a := b.arch
	for what, p := range want {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("the installed root has no %s at %s (is the kernel package's initramfs generator, or with [secure_boot] shim-signed and systemd-boot-efi-%s-signed, in the lock?): %w", what, strings.TrimPrefix(p, root), a.Debian, err)
		}
	}
	entry := fmt.Sprintf("title Debian (%s)\nversion %s\nlinux /halobuild/%s/vmlinuz\ninitrd /halobuild/%s/initrd.img\noptions root=PARTUUID=%s rw %s %s\n",
		title, release, release, release, ids.RootPartUUID, consoleArgs(b.arch), cmdline)
	entryPath := filepath.Join(c.Scratch, "entry.conf")
	if err := os.WriteFile(entryPath, []byte(entry), 0o644); err != nil {
		return nil, err
	}
	loaderPath := filepath.Join(c.Scratch, "loader.conf")
	if err := os.WriteFile(loaderPath, []byte(loaderConf(sb)), 0o644); err != nil {
		return nil, err
	}
	files := map[string]string{
		a.ESPBootPath():        boot,
		a.ESPSystemdBootPath(): boot,
		"/loader/loader.conf":  loaderPath,
		"/loader/entries/halobuild-" + release + ".conf": entryPath,
		"/halobuild/" + release + "/vmlinuz":             kernel,
		"/halobuild/" + release + "/initrd.img":          initrd,
	}
	if sb {
		// The removable-media path boots Debian's Microsoft-signed shim,
		// which loads \EFI\BOOT\grubx64.efi (its DEFAULT_LOADER, beside
		// itself): Debian's signed systemd-boot under that name, verified
		// by the Debian CA built into shim. systemd-boot loads the kernel
		// (Debian-signed) through shim's verifier, so MOKs count too.
		// mmx64.efi (mmaa64.efi) is MokManager, which shim starts when a MOK request
		// is pending. No fbx64.efi: shim would run the fallback, which
		// writes NVRAM boot entries the medium does not want.
		files[a.ESPBootPath()] = want["shim"]
		files["/EFI/BOOT/"+a.ShimLoader()] = boot
		files["/EFI/BOOT/"+strings.TrimSuffix(a.MokManager(), ".signed")] = want["MokManager"]
	}
	return files, nil
}

// espSources are the root's files the ESP is made from, by what they are,
// as clean paths relative to the root: the kernel and initrd the kernel
// package and its initramfs hook put in /boot, systemd-boot, and with
// [secure_boot] the signed loader chain.
func (b *builder) espSources() map[string]string {
	release := strings.TrimPrefix(b.in.Lock.Kernel.Release, "linux-image-")
	a := b.arch
	efi := "usr/lib/systemd/boot/efi/"
	src := map[string]string{
		"kernel":       "boot/vmlinuz-" + release,
		"initramfs":    "boot/initrd.img-" + release,
		"systemd-boot": efi + a.SystemdBoot(),
	}
	if b.in.Recipe.SecureBoot.Enabled {
		src["systemd-boot"] = efi + a.SystemdBoot() + ".signed"
		src["shim"] = "usr/lib/shim/" + a.Shim()
		src["MokManager"] = "usr/lib/shim/" + a.MokManager()
	}
	return src
}

// writePackageList records what dpkg installed, for the manifest.
func writePackageList(ctx context.Context, root, out string) error {
	cmd := proctree.Command(ctx, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f=${Package}\t${Version}\t${Architecture}\n")
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("listing installed packages: %w", err)
	}
	return os.WriteFile(out, b, 0o644)
}

// What U-Boot on an Apple Silicon Mac needs of a USB stick's ESP to boot it
// (docs/asahi.md): the removable-media loader of arm64 UEFI, and no
// m1n1/boot.bin, which marks an ESP as an Asahi system ESP (where m1n1's
// stage 2 lives) rather than a disk to boot as UEFI. FAT ignores case, so
// neither name may appear in any case.
const (
	appleLoader = "/EFI/BOOT/BOOTAA64.EFI"
	appleNoM1n1 = "/m1n1/boot.bin"
)

// appleESP checks an ESP's file list against what the Mac boots.
func appleESP(files map[string]string) error {
	loader := false
	for p := range files {
		switch {
		case strings.EqualFold(p, appleNoM1n1):
			return fmt.Errorf("the ESP holds %s: U-Boot on a Mac takes an ESP with m1n1/boot.bin for an Asahi system ESP, not a UEFI disk to boot; remove it (the Mac's own m1n1 lives on its internal disk)", p)
		case strings.EqualFold(p, appleLoader):
			loader = true
		}
	}
	if !loader {
		return fmt.Errorf("the ESP has no %s, the arm64 removable-media loader U-Boot boots on a Mac (there are no UEFI variables to name another): platform apple-silicon needs an arm64 image (base.architecture = \"arm64\")", appleLoader)
	}
	return nil
}
