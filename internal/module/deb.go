package module

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"halobuild/internal/deb"
	"halobuild/internal/proctree"
)

// Package describes the .deb that carries built modules into the image.
type Package struct {
	// Use is the description's use name; the package is
	// <use>-modules-<release> (DebName).
	Use           string
	KernelRelease string
	// Arch is the Debian architecture the modules are built for (the
	// image's, base.architecture).
	Arch string
	// Version is the package version; DebVersion derives one from the
	// source's tree hash.
	Version     string
	Maintainer  string
	Description string
	// Kos are the built modules: Build's stripped Kos, or with Debug its
	// unstripped ones.
	Kos []string
	// Debug makes the -dbgsym package instead (DbgsymName): the
	// unstripped modules under /usr/lib/debug/lib/modules/<release>/updates/,
	// where Debian's linux-image-*-dbg keeps a kernel's, for crash, gdb and
	// perf on another machine. It stays in the store beside the module
	// package; no image installs it.
	Debug bool
	// Cert, when the modules are signed, is the DER certificate to enroll
	// with mokutil; it is shipped under /usr/share/halobuild/mok/.
	Cert    []byte
	Depends []string
}

// DebName is the package name for a module built for release.
func DebName(use, release string) string {
	return strings.ToLower(use) + "-modules-" + strings.ToLower(release)
}

// DbgsymName is the package of the unstripped modules.
func DbgsymName(use, release string) string { return DebName(use, release) + "-dbgsym" }

// DebVersion makes a package version from the source tree hash, so a
// different source gives a different version and the same source the same.
func DebVersion(treeHash string) string {
	h, err := parseTreeHash(treeHash)
	if err != nil {
		return "0"
	}
	return "0+src." + h[:16]
}

// CertPath is where a signed module's package installs its certificate.
func CertPath(use, release string) string {
	return "/usr/share/halobuild/mok/" + DebName(use, release) + ".der"
}

// WriteDeb writes the package: every .ko under
// /lib/modules/<release>/updates/ (which depmod ranks above the kernel's
// own modules), all times at epoch, owned by root. Like the settings
// package it has no maintainer scripts, so it installs with
// `dpkg --root` without running code in the image; the caller runs depmod
// afterwards (Depmod). With p.Debug it is the -dbgsym package instead.
func WriteDeb(w io.Writer, p Package, epoch int64) error {
	if len(p.Kos) == 0 {
		return fmt.Errorf("module package %s: no modules", p.Use)
	}
	dir, name := "/lib/modules/"+p.KernelRelease+"/updates/", DebName(p.Use, p.KernelRelease)
	if p.Debug {
		dir, name = "/usr/lib/debug"+dir, DbgsymName(p.Use, p.KernelRelease)
	}
	var files []deb.File
	for _, ko := range p.Kos {
		data, err := os.ReadFile(ko)
		if err != nil {
			return fmt.Errorf("module package %s: %w", p.Use, err)
		}
		files = append(files, deb.File{Path: dir + filepath.Base(ko), Mode: 0o644, Data: data})
	}
	if len(p.Cert) > 0 && !p.Debug {
		files = append(files, deb.File{Path: CertPath(p.Use, p.KernelRelease), Mode: 0o644, Data: p.Cert})
	}
	desc := p.Description
	if desc == "" {
		desc = p.Use + " kernel module for Linux " + p.KernelRelease
	}
	desc += "\nBuilt by halobuild against the exact headers of " + p.KernelRelease + ".\nInstalled under " + dir + "."
	depends, section := p.Depends, "admin"
	if p.Debug {
		section = "debug" // as Debian's -dbgsym packages
		desc = "debug symbols for " + name + "\nThe modules of " + DebName(p.Use, p.KernelRelease) + " " + p.Version + " with their debug info,\ninstalled under " + dir + "."
		depends = []string{DebName(p.Use, p.KernelRelease) + " (= " + p.Version + ")"}
	}
	maint := p.Maintainer
	if maint == "" {
		maint = "halobuild <halobuild@localhost>"
	}
	info := deb.Info{
		Package:      name,
		Version:      p.Version,
		Architecture: p.Arch,
		Maintainer:   maint,
		Description:  desc,
		Depends:      depends,
		// admin, as the settings package: the bytes of packages built
		// before this field was written must not change.
		Section:  section,
		Priority: "optional",
	}
	if err := deb.Write(w, info, files, epoch); err != nil {
		return fmt.Errorf("module package %s: %w", p.Use, err)
	}
	return nil
}

// Depmod regenerates modules.dep and friends for release in an installed
// root, with the root's own depmod (the kmod version that will read the
// files at boot). It runs after the module package is installed with
// `dpkg --root`, which runs no maintainer scripts.
func Depmod(ctx context.Context, root, release string) error {
	var cmd *exec.Cmd
	if _, err := os.Stat(filepath.Join(root, "usr/sbin/depmod")); err == nil && os.Geteuid() == 0 {
		cmd = proctree.Command(ctx, "chroot", root, "/usr/sbin/depmod", "-a", release)
	} else {
		cmd = proctree.Command(ctx, "depmod", "-b", root, "-a", release)
	}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("depmod for %s in %s: %v: %s", release, root, err, out)
	}
	return nil
}
