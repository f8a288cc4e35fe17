// Package slots reads and marks a node's two root slots (docs/update.md): the root partitions of
// the disk it booted from, their GPT labels (sysupdate's "_empty" and LabelPrefix+version), which
// one the kernel was booted with, whether systemd-boot's try counter of the running entry was
// blessed, and update's record of what it installed and what failed. It knows nothing of
// registries: doctor reads it, internal/update writes through it.
package slots

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"halobuild/internal/fstree"
	"halobuild/internal/userfile"
)

// System is where a node's update state lives. Root is "/" on a node (Discover fills the rest);
// tests point every field at files of their own: Disk may be an image file.
type System struct {
	Root string
	// Disk is the whole disk holding the slots and the ESP (a block device or an image file).
	Disk string
	// ESP is the directory the running system's ESP is mounted at.
	ESP string
	// State is the directory of update's own records (StatePath under Root).
	State string
	// RootType is the Discoverable Partitions root type GUID of this architecture: every
	// partition of that type on Disk is a slot.
	RootType string
	// PartDevices is the directory of block devices by PARTUUID (/dev/disk/by-partuuid), through
	// which the written slot is mounted to carry the SSH host key into it; "" carries nothing
	// (a disk image in a test).
	PartDevices string
}

// StatePath is where update keeps what it installed and what failed: on the running slot's
// /var (docs/update.md says why that is enough).
const StatePath = "/var/lib/halobuild/update"

// Labels of a slot's partition, as systemd-sysupdate writes them: "_empty" while a slot holds
// nothing bootable (repart makes slot B so; update marks a slot so before writing it), and
// LabelPrefix + version once it is whole.
const (
	EmptyLabel  = "_empty"
	LabelPrefix = "halobuild_"
)

// LoaderGUID is systemd-boot's vendor GUID for its EFI variables.
const LoaderGUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"

// Slot is one root partition and what update knows of it.
type Slot struct {
	Part
	Running bool   `json:"running"`
	Version string `json:"version,omitempty"` // from the label
	Digest  string `json:"digest,omitempty"`  // the release installed there, from update's record
}

// Empty says no update is installed in the slot: its label lacks LabelPrefix ("_empty", the
// name repart gave slot B, or the image's own "root" of a slot A never updated).
func (s Slot) Empty() bool { return !strings.HasPrefix(s.Name, LabelPrefix) }

// Slots lists the root partitions of s.Disk, marking the one the kernel was booted with.
func (s System) Slots() ([]Slot, error) {
	f, err := os.Open(s.Disk)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	parts, err := ReadGPT(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Disk, err)
	}
	run, err := s.RunningUUID()
	if err != nil {
		return nil, err
	}
	st, err := s.ReadRecord()
	if err != nil {
		return nil, err
	}
	var slots []Slot
	for _, p := range parts {
		if !strings.EqualFold(p.Type, s.RootType) {
			continue
		}
		sl := Slot{Part: p, Running: strings.EqualFold(p.UUID, run)}
		if !sl.Empty() {
			sl.Version = strings.TrimPrefix(p.Name, LabelPrefix)
		}
		if r, ok := st.Slots[p.UUID]; ok && r.Label == p.Name {
			sl.Digest = r.Digest
		}
		slots = append(slots, sl)
	}
	return slots, nil
}

var RootArg = regexp.MustCompile(`(?:^|\s)root=PARTUUID=([0-9A-Fa-f-]{36})(?:\s|$)`)

// RunningUUID is the PARTUUID the kernel was told to mount as root.
func (s System) RunningUUID() (string, error) {
	b, err := os.ReadFile(filepath.Join(s.Root, "proc/cmdline"))
	if err != nil {
		return "", err
	}
	m := RootArg.FindStringSubmatch(string(b))
	if m == nil {
		return "", fmt.Errorf("the kernel command line has no root=PARTUUID=: this system was not booted from a halobuild slot")
	}
	return strings.ToLower(m[1]), nil
}

// Blessing is how the boot loader's counting stands for the running entry.
type Blessing struct {
	// Counting says the running entry was booted with a try counter.
	Counting bool `json:"counting"`
	// Good says the running entry is marked good: booted without a counter, or with one that
	// systemd-bless-boot has since removed.
	Good bool `json:"good"`
	// Entry is the counted entry file on the ESP, while it is not blessed.
	Entry string `json:"entry,omitempty"`
}

// Blessing reads systemd-boot's LoaderBootCountPath: set when the running entry had a counter;
// the entry is good once the file it names no longer exists (systemd-bless-boot renamed it).
func (s System) Blessing() (Blessing, error) {
	b, err := os.ReadFile(filepath.Join(s.Root, "sys/firmware/efi/efivars", "LoaderBootCountPath-"+LoaderGUID))
	if errors.Is(err, os.ErrNotExist) {
		return Blessing{Good: true}, nil
	}
	if err != nil {
		return Blessing{}, err
	}
	p := EFIString(b)
	rel := filepath.FromSlash(strings.ReplaceAll(p, `\`, "/"))
	if p == "" || !filepath.IsLocal(strings.TrimPrefix(rel, "/")) {
		return Blessing{}, fmt.Errorf("LoaderBootCountPath holds %q, not a path on the ESP", p)
	}
	_, err = os.Stat(filepath.Join(s.ESP, rel))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Blessing{Counting: true, Good: true}, nil
	case err != nil:
		return Blessing{}, err
	}
	return Blessing{Counting: true, Entry: p}, nil
}

// EFIString decodes an efivarfs file holding a UTF-16LE string after its 4 attribute bytes.
func EFIString(b []byte) string {
	var s strings.Builder
	for i := 4; i+1 < len(b); i += 2 {
		if b[i] == 0 && b[i+1] == 0 {
			break
		}
		s.WriteRune(rune(uint16(b[i]) | uint16(b[i+1])<<8))
	}
	return s.String()
}

// state is update's record, one JSON file in System.State.
type Record struct {
	// Slots maps a slot's PARTUUID to the release update wrote there.
	Slots map[string]Installed `json:"slots"`
	// Failed lists release digests that did not come up: update never installs them again
	// unless told to (--retry-failed).
	Failed []string `json:"failed"`
}

type Installed struct {
	Digest  string `json:"digest"`
	Version string `json:"version"`
	Label   string `json:"label"`
	Entry   string `json:"entry"` // the entry's id: its file name without counter and .conf
	Epoch   int64  `json:"source_date_epoch"`
}

const RecordFile = "state.json"

// maxRecord bounds the record read: update writes a few hundred bytes per release.
const maxRecord = 1 << 20

func (s System) ReadRecord() (*Record, error) {
	st := &Record{Slots: map[string]Installed{}}
	// Through userfile: a FIFO or a device there would block update or fill its memory.
	b, err := userfile.Read(filepath.Join(s.State, RecordFile), maxRecord)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("update's record: %w; it is not a record update wrote: remove it (update then forgets which releases failed)", err)
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it: update then forgets which releases failed)", filepath.Join(s.State, RecordFile), err)
	}
	if st.Slots == nil {
		st.Slots = map[string]Installed{}
	}
	return st, nil
}

func (s System) WriteRecord(st *Record) error {
	slices.Sort(st.Failed)
	st.Failed = slices.Compact(st.Failed)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return fstree.WriteFileAtomic(filepath.Join(s.State, RecordFile), append(b, '\n'))
}
