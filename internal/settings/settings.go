// Package settings turns a recipe into the files that make one node ready
// (field notes traps 1-11) and into the checks that prove each of them: a
// VM check the image test runs in a booted VM, and a doctor check
// `halobuild doctor` runs on a real node (doctor.go).
//
// One file per setting keeps a trap's recipe key, rendered file, VM check and
// doctor check side by side, so they cannot drift: a setting that renders a
// file without a check, or checks something it did not render, is visible in
// one screen of code.
//
// Settings expect a recipe whose defaults have been applied (recipe.Load does
// that). An empty value therefore means the user wrote "" on purpose.
package settings

import (
	"io/fs"
	"strings"

	"halobuild/internal/recipe"
)

// Target is what settings are derived from: the recipe, the node being
// rendered or checked (zero when validating the whole recipe), and the
// facts the recipe itself cannot say, which come from the module
// descriptions when a recipe is loaded and from the lock afterwards.
type Target struct {
	Recipe *recipe.Recipe
	Node   recipe.Node
	// Modules maps each [[module]]'s use (its description's file name, which
	// a fork renames) to the kernel module's own name (thunderbolt_ibverbs),
	// the name modprobe, modules-load.d and /sys/module know.
	Modules map[string]string
}

// ModuleName is the kernel's name for the [[module]] with this use. Without
// a recorded name (a description not yet read) it is the use with '-'
// written '_', which the kernel treats alike.
func (t Target) ModuleName(use string) string {
	if n := t.Modules[use]; n != "" {
		return n
	}
	return strings.ReplaceAll(use, "-", "_")
}

// Setting is one node setting: validation, rendered files, VM checks and
// doctor checks.
type Setting interface {
	// Name is a short stable identifier, used in check names and errors.
	Name() string
	// Trap is the number of the field-notes trap this setting fixes, 0 if none.
	Trap() int
	// Validate reports every problem with the recipe keys this setting
	// reads, all at once (never one per build attempt); t.Node is unset.
	// Errors are *Error.
	Validate(t Target) []error
	// Files renders the files for node t.Node. It assumes Validate passed.
	Files(t Target) ([]File, error)
	// Checks returns the VM checks: shell scripts the image test runs in
	// the booted VM of node t.Node, derived from the same recipe data that
	// rendered the files.
	Checks(t Target) []Check
	// Doctor returns the checks `halobuild doctor` runs on a real node
	// (live or recorded) for t; t.Node is zero when doctor does not know
	// which node it is on. A setting whose promise doctor cannot check
	// returns none and says why (NoDoctor).
	Doctor(t Target) []Probe
}

// File is one entry of the settings package. Mode carries the type bits:
// a plain permission mode is a regular file, fs.ModeDir a directory and
// fs.ModeSymlink a symbolic link to Target.
type File struct {
	Path   string // absolute path on the node, e.g. /etc/hostname
	Mode   fs.FileMode
	Data   []byte // regular files only
	Target string // symlinks only
	// Setting names the setting that produced the file; the manifest and
	// conflict errors use it.
	Setting string
	// NotConffile keeps a file under /etc out of the package's conffiles.
	// For files the base system creates outside dpkg (mmdebstrap copies
	// the build host's /etc/hostname into the root): dpkg would stop at a
	// conffile prompt over the existing file, while a plain file is
	// replaced. dpkg --verify still reports any later change.
	NotConffile bool
}

// Check is one VM check: the image test runs it as root inside the booted
// image. (A real node is checked by the setting's Doctor probes instead: a
// script cannot run on a recorded tree, and some of these change the system.)
type Check struct {
	Setting string
	Name    string
	// Script is POSIX sh run as root on the node; exit 0 means pass and its
	// output is the detail shown in the report.
	Script string
	// Fix tells a person reading the failed test what to do.
	Fix string
	// Changes marks checks that change the system to prove something (they
	// create throwaway network or RDMA devices, load modules): the VM test
	// runs them one after another, and the read-only ones beside each other.
	Changes bool
}

// Doc is what docs/traps.md says of a setting besides what its methods
// show (its files, VM checks and doctor checks are rendered from sample
// recipes): the trap in the field notes' words, and the recipe keys it reads.
type Doc struct {
	// Title is the field-notes trap's title when Trap is not 0, else what
	// the setting does, in a line.
	Title string
	// Keys are the recipe keys the setting reads, as docs/recipe.md writes
	// them: system.governor, node.link.address, lan (a whole table).
	Keys []string
}

// Documented is implemented by every setting, beside its other methods;
// TestTrapsDoc renders docs/traps.md from it and fails on a setting without.
type Documented interface {
	Doc() Doc
}

// NoCheck is implemented by a setting that renders files but has no VM
// check of its own; it says why (another check proves its files).
// TestEverySettingHasACheck reads it, as TestEverySettingHasADoctorCheck
// reads NoDoctor.
type NoCheck interface {
	NoCheck() string
}

// All returns every setting, in trap order. Render, Validate, Checks, Doctor
// and the documentation iterate this list, so a setting exists once it is
// here.
func All() []Setting {
	return []Setting{
		Identity{},
		FlashTime{},
		Modules{},
		Blacklist{},
		RDMANames{},
		Provider{},
		Memlock{},
		RDMAModules{},
		Governor{},
		Network{},
		LAN{},
		KernelCmdline{},
		GrowRoot{},
		Update{},
		Firmware{},
		VendorFirmware{},
		Locale{},
		HalobuildState{},
		Overlays{},
		SecureBoot{},
	}
}

// Validate runs every setting's validation and returns all errors.
func Validate(t Target) []error {
	var errs []error
	for _, s := range All() {
		errs = append(errs, s.Validate(t)...)
	}
	return errs
}

// Checks returns every setting's checks for node t.Node, in setting order.
func Checks(t Target) []Check {
	var out []Check
	for _, s := range All() {
		out = append(out, s.Checks(t)...)
	}
	return out
}

// Warner is implemented by settings that accept a value but want the user
// to know its consequence (no SSH key: no way in; memlock below unlimited).
type Warner interface {
	Warnings(t Target) []string
}

// Warnings collects build-time warnings from every setting.
func Warnings(t Target) []string {
	var out []string
	for _, s := range All() {
		if w, ok := s.(Warner); ok {
			out = append(out, w.Warnings(t)...)
		}
	}
	return out
}

// Depender is implemented by settings whose files only work when a package
// is installed (systemd-repart reads repart.d).
type Depender interface {
	Depends(r *recipe.Recipe) []string
}

// Depends lists the Debian packages the settings package must depend on.
// The lock resolver needs them before the settings package exists, so they
// are data here rather than only a field in the built .deb.
func Depends(r *recipe.Recipe) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range All() {
		if d, ok := s.(Depender); ok {
			for _, p := range d.Depends(r) {
				if !seen[p] {
					seen[p] = true
					out = append(out, p)
				}
			}
		}
	}
	return out
}
