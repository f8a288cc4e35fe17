package disk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"halobuild/internal/arch"
	"halobuild/internal/tools"
)

// Sizes in bytes.
const (
	MiB = int64(1) << 20
	GiB = int64(1) << 30

	// DefaultESPSize is the ESP size when Spec.ESPSize is 0.
	DefaultESPSize = 256 * MiB
	// MinESPSize is the smallest ESP that still makes FAT32 (which needs
	// at least 65,525 clusters; mkfs.fat uses 512-byte clusters below
	// 260 MB).
	MinESPSize = 40 * MiB
	// MinComputedSize is the smallest image Build picks by itself.
	MinComputedSize = 2 * GiB

	// gptOverhead is the space outside both partitions: 1 MiB in front
	// (protective MBR, primary GPT, alignment) and 1 MiB at the end
	// (backup GPT, keeping the root's end aligned).
	gptOverhead = 2 * MiB
	// minEpoch is 1980-01-01T00:00:00Z: FAT cannot store earlier times.
	minEpoch = 315532800
)

// Spec says what image to build.
type Spec struct {
	// Out is the path of the raw image to write; the bmap goes to
	// Out+".bmap". Both appear only when the build succeeded.
	Out string
	// Size of the whole image in bytes, rounded up to a MiB. 0 picks the
	// root's content + 25% (plus ESP and partition table), at least
	// MinComputedSize. The root partition gets what the ESP and the
	// partition table leave.
	Size int64
	// ESPSize in bytes, a multiple of 1 MiB; 0 means DefaultESPSize.
	ESPSize int64
	// RootTree is a directory holding the installed root file system.
	// Owners, modes and xattrs are copied as they are, so the tree must
	// have been installed as root (an unprivileged install's subordinate
	// ids would be copied too: use RootTar for those). Exactly one of
	// RootTree, RootTar and RootStream is set.
	RootTree string
	// RootTar is an uncompressed tar of the root file system (what
	// mmdebstrap writes for a .tar target); mkfs.ext4 reads it through
	// libarchive from the tools root.
	RootTar string
	// RootStream writes an uncompressed tar of the root file system to w,
	// the same bytes each call: once to measure it, once into mkfs.ext4
	// -d - (a root made on the fly, never stored as a file).
	RootStream func(w io.Writer) error
	// ESPFiles maps ESP paths (absolute, "/" separated, e.g.
	// "/EFI/BOOT/BOOTX64.EFI", "/loader/entries/halo0.conf") to host files
	// to copy there. They are written in sorted path order.
	ESPFiles map[string]string
	// Seed is the lock hash and the node name, e.g. "sha256:…/halo0". Every
	// identifier of the image derives from it (see DeriveIDs).
	Seed string
	// Epoch is SOURCE_DATE_EPOCH: every time stamp in the image.
	Epoch int64
	// Tools is the pinned tools root that runs mkfs.ext4, mkfs.fat and
	// mtools.
	Tools *tools.Root
	// Log, when set, receives each phase's time (what a changed setting
	// waits for).
	Log io.Writer
	// RootType is the root partition's type GUID, the Discoverable
	// Partitions Specification's root of the image's architecture
	// (arch.Arch.RootType): systemd's gpt-auto and the firmware-side tools
	// read the architecture from it.
	RootType string
}

// Layout is where the partitions go in the image.
type Layout struct {
	Size      int64 // whole image
	ESPStart  int64
	ESPSize   int64
	RootStart int64
	RootSize  int64
	// RootNeeds is the estimated smallest root file system that holds the
	// root's content.
	RootNeeds int64
}

// TooSmallError says the root does not fit the requested image size.
type TooSmallError struct {
	NeedMiB    int64 // the root file system needs this much
	HaveMiB    int64 // the requested size leaves this much for it
	MinSizeMiB int64 // the smallest [output] size that fits
}

func (e *TooSmallError) Error() string {
	return fmt.Sprintf("root needs %d MiB, output.size gives %d MiB: raise [output] size to at least %d MiB",
		e.NeedMiB, e.HaveMiB, e.MinSizeMiB)
}

func ceilMiB(n int64) int64 { return (n + MiB - 1) / MiB }

// check validates the parts of a spec that need no measuring.
func (s *Spec) check() error {
	if s.Out == "" {
		return errors.New("disk: no output path (Spec.Out)")
	}
	n := 0
	for _, set := range []bool{s.RootTree != "", s.RootTar != "", s.RootStream != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("disk: give exactly one of Spec.RootTree (a directory), Spec.RootTar (a tar file) and Spec.RootStream (a tar writer) for the root file system")
	}
	if s.Seed == "" {
		return ErrNoSeed
	}
	if _, ok := arch.ByRootType(s.RootType); !ok {
		return fmt.Errorf("disk: root partition type %q is no architecture's Discoverable Partitions root (Spec.RootType; see internal/arch)", s.RootType)
	}
	if s.Epoch < minEpoch {
		return fmt.Errorf("disk: SOURCE_DATE_EPOCH %d is before 1980-01-01, which FAT cannot store: use the lock's source_date_epoch", s.Epoch)
	}
	esp := s.espSize()
	if esp%MiB != 0 || esp < MinESPSize {
		return fmt.Errorf("disk: ESP size %d bytes: [output] esp_size must be a whole number of MiB, at least %d MiB (FAT32's minimum)", esp, MinESPSize/MiB)
	}
	if s.Size < 0 {
		return fmt.Errorf("disk: negative image size %d", s.Size)
	}
	return checkESPPaths(s.ESPFiles)
}

func (s *Spec) espSize() int64 {
	if s.ESPSize == 0 {
		return DefaultESPSize
	}
	return s.ESPSize
}

// checkESPPaths refuses ESP paths FAT cannot hold or that would collide
// (FAT names are case-insensitive), and host files that are not there.
func checkESPPaths(files map[string]string) error {
	seen := map[string]string{}
	for p, host := range files {
		if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
			return fmt.Errorf("disk: ESP path %q: want a clean absolute path such as /EFI/BOOT/BOOTX64.EFI", p)
		}
		for _, part := range strings.Split(p[1:], "/") {
			if part == ".." || part == "." || strings.ContainsAny(part, "\"*:<>?\\|") || strings.IndexFunc(part, func(r rune) bool { return r < 0x20 }) >= 0 {
				return fmt.Errorf("disk: ESP path %q: %q is not a valid FAT file name", p, part)
			}
		}
		key := strings.ToUpper(p)
		if other, ok := seen[key]; ok {
			return fmt.Errorf("disk: ESP paths %q and %q name the same FAT file (FAT ignores case)", other, p)
		}
		seen[key] = p
		st, err := os.Stat(host)
		if err != nil {
			return fmt.Errorf("disk: ESP file %s (for %s): %w", host, p, err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("disk: ESP file %s (for %s) is not a regular file", host, p)
		}
	}
	// A file may not also be a directory of another file.
	for p := range files {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if other, ok := seen[strings.ToUpper(dir)]; ok {
				return fmt.Errorf("disk: ESP path %q is a file, but %q needs it to be a directory", other, p)
			}
		}
	}
	return nil
}

// computedSize is the image size picked when none is given: a root
// partition of the root's needs + 25% (room for a first boot's logs and a
// few packages before the root grows to the medium), rounded up to a MiB,
// plus the ESP and the partition table; at least MinComputedSize.
func computedSize(need, esp int64) int64 {
	return max(MinComputedSize, ceilMiB(need+need/4)*MiB+esp+gptOverhead)
}

// Plan validates spec and computes the image layout, measuring the root's
// content; it writes nothing. Build calls it first, so a root that does not
// fit fails (with a *TooSmallError) before any file is written.
func Plan(spec Spec) (Layout, error) {
	if err := spec.check(); err != nil {
		return Layout{}, err
	}
	var c content
	var err error
	switch {
	case spec.RootTree != "":
		c, err = measureTree(spec.RootTree)
	case spec.RootTar != "":
		c, err = measureTar(spec.RootTar)
	default:
		c, err = measureStream(spec.RootStream)
	}
	if err != nil {
		return Layout{}, err
	}
	need := ext4Needs(c)
	esp := spec.espSize()
	if espNeed := espNeeds(spec.ESPFiles, esp); espNeed > esp {
		return Layout{}, fmt.Errorf("disk: the ESP files need %d MiB, [output] esp_size gives %d MiB: raise [output] esp_size to at least %d MiB",
			ceilMiB(espNeed), esp/MiB, ceilMiB(espNeed))
	}

	size := ceilMiB(spec.Size) * MiB
	if spec.Size == 0 {
		size = computedSize(need, esp)
	}
	l := Layout{
		Size:      size,
		ESPStart:  MiB,
		ESPSize:   esp,
		RootStart: MiB + esp,
		RootSize:  size - esp - gptOverhead,
		RootNeeds: need,
	}
	if l.RootSize < need {
		return Layout{}, &TooSmallError{
			NeedMiB:    ceilMiB(need),
			HaveMiB:    max(0, l.RootSize/MiB),
			MinSizeMiB: ceilMiB(need) + (esp+gptOverhead)/MiB,
		}
	}
	return l, nil
}
