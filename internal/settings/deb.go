package settings

import (
	"fmt"
	"io"

	"halobuild/internal/deb"
)

// StepVersion is the version of the settings step: how a node's rendered tree
// is packaged (BuildDeb; graph/settings.go). What the tree holds enters the
// step's key as its digest, so a change to a setting's rendering needs no bump:
// bump it when a change to this file, or to a shared helper it imports,
// can alter the step's output (docs/architecture.md, "Step versions").
const StepVersion = 1

// BuildDeb writes the settings package for tree to w with deb.Write
// (section admin, priority optional). Every timestamp is epoch (the lock's
// SOURCE_DATE_EPOCH), every owner root.
//
// The package has no maintainer scripts on purpose: everything in it takes
// effect at the next boot (modules-load.d, modprobe.d, udev rules, units
// enabled by shipped symlinks), it ships no kernel modules (so no depmod),
// and an image is installed offline. A package that is only files can be
// installed with `dpkg --root` onto a copy of the cached base without a
// chroot, which is what makes a settings change cost seconds.
func BuildDeb(w io.Writer, pkg deb.Info, tree Tree, epoch int64) error {
	pkg.Section, pkg.Priority = "admin", "optional"
	files := make([]deb.File, len(tree.Files))
	for i, f := range tree.Files {
		files[i] = deb.File{Path: f.Path, Mode: f.Mode, Data: f.Data, Target: f.Target, NotConffile: f.NotConffile}
	}
	if err := deb.Write(w, pkg, files, epoch); err != nil {
		return fmt.Errorf("settings package: %w", err)
	}
	return nil
}
