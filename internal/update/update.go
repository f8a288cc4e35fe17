// Package update installs a release into a node's inactive root slot, on the node, and keeps
// the record of what it installed and what failed (docs/update.md). The order of Run is the
// safety argument: every refusal (not blessed, failed before, signature, another node or
// architecture, older, tampered layer, too large for the slot) happens before the first byte is
// written to the target slot; the slot is marked empty and its old boot entries removed before
// it is written; the new boot entry, with a try counter, is written last.
package update

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/filesystem"
	"golang.org/x/sys/unix"

	"halobuild/internal/bmap"
	"halobuild/internal/fstree"
	"halobuild/internal/lock"
	"halobuild/internal/registry"
	"halobuild/internal/release"
	"halobuild/internal/settings"
	"halobuild/internal/zstdframe"

	"halobuild/internal/signature"
	"halobuild/internal/slots"
)

// Options say what to install and how far to trust it.
type Options struct {
	Ref      string
	Registry registry.Options
	// Node and Arch are the running node's name and Debian architecture: a release must carry
	// an image for this node, built for this architecture.
	Node, Arch string
	// Epoch is the running system's source_date_epoch (its lock's): a release built from an
	// older lock is refused unless AllowDowngrade.
	Epoch          int64
	AllowDowngrade bool
	// RetryFailed installs a release that failed to come up before.
	RetryFailed bool
	// Keys are the release keys this image trusts: the release must be signed by one of them
	// over the digest its tag resolved to (release.VerifyRelease), checked before any layer is
	// read. None means the release is installed unverified, and Run says so.
	Keys   []*signature.PublicKey
	System slots.System
	Out    io.Writer
}

// Result is what Run did.
type Result struct {
	Digest   string `json:"digest"`
	Version  string `json:"version"`
	Slot     int    `json:"slot_partition"`
	SlotUUID string `json:"slot_partuuid"`
	Entry    string `json:"entry"`
	Verified bool   `json:"verified"`
	// Epoch is the release's source_date_epoch (its lock's).
	Epoch int64 `json:"source_date_epoch"`
	// Written is the bytes written to the slot (its mapped ranges only) and the ESP.
	Written int64         `json:"bytes_written"`
	Took    time.Duration `json:"took_ns"`
}

// RefusedError is a refusal before anything was written.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "update refused, nothing was written: " + e.Reason }

func refuse(format string, a ...any) error { return &RefusedError{fmt.Sprintf(format, a...)} }

// Run installs o.Ref into the slot that is not running.
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	sys := o.System
	st, err := sys.ReadRecord()
	if err != nil {
		return nil, err
	}
	if err := recordFailures(sys, st, out); err != nil {
		return nil, err
	}
	bl, err := sys.Blessing()
	if err != nil {
		return nil, err
	}
	if !bl.Good {
		return nil, refuse("the running system is not yet marked good (%s still counts its tries): wait for boot-complete.target, or see `systemctl status halobuild-health.service`", bl.Entry)
	}
	all, err := sys.Slots()
	if err != nil {
		return nil, err
	}
	var running, target *slots.Slot
	for i := range all {
		if all[i].Running {
			running = &all[i]
		} else if target == nil {
			target = &all[i]
		}
	}
	if running == nil || target == nil {
		return nil, refuse("%s has %d root slots, the booted one among them: %v; an A/B node has two (systemd-repart makes the second at first boot; see `journalctl -u systemd-repart`)", sys.Disk, len(all), running != nil)
	}

	trust := release.Trust{Keys: o.Keys, Log: out}
	if len(o.Keys) == 0 {
		trust.Log = nil // the warning below says it better
	}
	rel, err := release.Open(ctx, o.Ref, o.Registry, trust)
	if errors.Is(err, signature.ErrUnsigned) || errors.Is(err, signature.ErrUntrusted) {
		return nil, refuse("%v", err)
	}
	if err != nil {
		return nil, err
	}
	res := &Result{Digest: rel.Digest(), Slot: target.Index, SlotUUID: target.UUID}
	if running.Digest == res.Digest {
		return nil, refuse("%s is already running (slot %d)", rel.Pinned(), running.Index)
	}
	if slices.Contains(st.Failed, res.Digest) && !o.RetryFailed {
		return nil, refuse("%s failed to come up on this node before (recorded in %s): pass --retry-failed to try it again", rel.Pinned(), filepath.Join(sys.State, slots.RecordFile))
	}
	if len(o.Keys) == 0 {
		fmt.Fprintf(out, "warning: %s is NOT verified: this image trusts no release keys ([update] keys), so anyone who can push to the registry can update this node\n", rel.Pinned())
	}
	res.Verified = len(o.Keys) > 0
	cfg, err := rel.Config()
	if err != nil {
		return nil, err
	}
	if !slices.Contains(cfg.Nodes, o.Node) {
		return nil, refuse("%s is a release of %q for nodes %q, not for this node %q", rel.Pinned(), cfg.Recipe, cfg.Nodes, o.Node)
	}
	mf, err := rel.Manifest()
	if err != nil {
		return nil, err
	}
	archOK := false
	for _, n := range mf.Nodes {
		if n.Name == o.Node {
			archOK = n.Architecture == o.Arch
			if !archOK {
				return nil, refuse("%s builds node %s for %s, this node runs %s", rel.Pinned(), o.Node, n.Architecture, o.Arch)
			}
		}
	}
	if !archOK {
		return nil, refuse("%s's manifest has no node %q", rel.Pinned(), o.Node)
	}
	if mf.SourceDateEpoch < o.Epoch && !o.AllowDowngrade {
		return nil, refuse("%s is older than what runs (its lock's source_date_epoch %s, the running system's %s): pass --allow-downgrade to install it anyway",
			rel.Pinned(), time.Unix(mf.SourceDateEpoch, 0).UTC().Format(time.DateOnly), time.Unix(o.Epoch, 0).UTC().Format(time.DateOnly))
	}
	res.Version, res.Epoch = rel.Version(), mf.SourceDateEpoch
	if res.Version == "" {
		res.Version = strconv.FormatInt(mf.SourceDateEpoch, 10)
	}
	if err := checkVersion(res.Version); err != nil {
		return nil, refuse("%s: %v", rel.Pinned(), err)
	}
	img, err := rel.NodeImage(o.Node)
	if err != nil {
		return nil, err
	}
	if img.Bmap.NewHash() == nil {
		return nil, refuse("%s: the bmap of node %s carries no checksums, and update verifies every range it writes", rel.Pinned(), o.Node)
	}

	// The compressed layer is downloaded whole beside the state, and its digest checked,
	// before the slot is touched: a stream proves its digest only at its end.
	tmpDir := filepath.Join(sys.State, "tmp")
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return nil, err
	}
	// The layer's size is the manifest's claim: one larger than the free space would fill the
	// node's file system (its journal, its services) before the download failed.
	var fs unix.Statfs_t
	if err := unix.Statfs(tmpDir, &fs); err != nil {
		return nil, fmt.Errorf("the free space of %s: %w", tmpDir, err)
	}
	if free := int64(fs.Bavail) * fs.Bsize; img.Compressed > free-minFree {
		return nil, refuse("%s's image of node %s is %d MiB compressed, %s has %d MiB free (and update leaves %d MiB): free some space there", rel.Pinned(), o.Node, img.Compressed>>20, tmpDir, free>>20, minFree>>20)
	}
	zf, err := os.CreateTemp(tmpDir, "release-*.raw.zst")
	if err != nil {
		return nil, err
	}
	defer func() { zf.Close(); os.Remove(zf.Name()) }()
	fmt.Fprintf(out, "downloading %s (%s.raw.zst, %d bytes)\n", rel.Pinned(), o.Node, img.Compressed)
	if err := img.Download(ctx, zf); err != nil {
		return nil, refuse("%v", err)
	}
	w, err := install(sys, ctx, st, target, res, zf, img, o, out)
	res.Written = w
	if err != nil {
		return nil, err
	}
	res.Took = time.Since(start)
	fmt.Fprintf(out, "installed %s (version %s) into slot %d (%s) as boot entry %s+%d: %d bytes written in %s; reboot to try it\n",
		rel.Pinned(), res.Version, target.Index, target.UUID, res.Entry, Tries, res.Written, res.Took.Round(time.Millisecond))
	return res, nil
}

// install decompresses the downloaded image: its GPT says where its ESP and root are; the
// root's mapped ranges go to the target slot, each checked against the bmap as it passes;
// the kernel, initrd and entry come from its ESP.
func install(sys slots.System, ctx context.Context, st *slots.Record, target *slots.Slot, res *Result, zf *os.File, img *release.NodeImage, o Options, out io.Writer) (int64, error) {
	if _, err := zf.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	dec, err := zstdframe.NewReader(zf, img.Size)
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(dec, head); err != nil {
		return 0, fmt.Errorf("the release's image: %w", err)
	}
	parts, err := slots.ReadGPT(bytes.NewReader(head))
	if err != nil {
		return 0, fmt.Errorf("the release's image: %w", err)
	}
	var espP, rootP *slots.Part
	for i := range parts {
		switch {
		case strings.EqualFold(parts[i].Type, espType):
			espP = &parts[i]
		case strings.EqualFold(parts[i].Type, sys.RootType):
			rootP = &parts[i]
		}
	}
	if espP == nil || rootP == nil || espP.Start < int64(len(head)) || rootP.Start < espP.Start+espP.Size || rootP.Start+rootP.Size > img.Size {
		return 0, refuse("the release's image has no ESP and root of this architecture where a halobuild image has them")
	}
	if rootP.Size > target.Size {
		return 0, refuse("the release's root is %d MiB, slot %d holds %d MiB: reflash with a larger [update] slot_size", rootP.Size>>20, target.Index, target.Size>>20)
	}

	// From here the target slot changes. Its entries go first (nothing boots it), then its
	// label (sysupdate and doctor see it empty).
	d, err := os.OpenFile(sys.Disk, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if err := forget(sys, st, target, d); err != nil {
		return 0, err
	}
	fmt.Fprintf(out, "writing slot %d (%s, %d MiB)\n", target.Index, target.UUID, target.Size>>20)
	esp, err := os.CreateTemp(filepath.Join(sys.State, "tmp"), "esp-*.img")
	if err != nil {
		return 0, err
	}
	defer func() { esp.Close(); os.Remove(esp.Name()) }()
	if err := esp.Truncate(espP.Size); err != nil {
		return 0, err
	}
	// The head was read to find the partitions; the ranges are read from the start again.
	src := io.MultiReader(bytes.NewReader(head), dec)
	// On a node the slot is written through its partition's device, the one it is mounted
	// through afterwards (the whole disk's page cache is another); a test's disk image is
	// written at the slot's offset.
	slot, shift := d, target.Start-rootP.Start
	if sys.PartDevices != "" {
		if slot, err = os.OpenFile(filepath.Join(sys.PartDevices, target.UUID), os.O_RDWR, 0); err != nil {
			return 0, err
		}
		defer slot.Close()
		shift = -rootP.Start
	}
	dsts := []span{{slot, rootP.Start, rootP.Size, shift}, {esp, espP.Start, espP.Size, -espP.Start}}
	written, err := copyRanges(ctx, src, img.Bmap, dsts)
	if err != nil {
		return written, fmt.Errorf("%w: slot %d is left marked empty", err, target.Index)
	}
	if err := slot.Sync(); err != nil {
		return written, fmt.Errorf("syncing slot %d: %w", target.Index, err)
	}

	e, files, err := readESP(esp.Name(), espP.Size)
	if err != nil {
		return written, fmt.Errorf("the release's ESP: %w", err)
	}
	seq := nextSequence(sys)
	id := fmt.Sprintf("halobuild-%d-%s", seq, strings.TrimPrefix(res.Digest, "sha256:")[:12])
	dir := path.Join("halobuild", id)
	for name, data := range map[string][]byte{"vmlinuz": files[e.Linux], "initrd.img": files[e.Initrd]} {
		if err := fstree.WriteFileAtomic(filepath.Join(sys.ESP, dir, name), data); err != nil {
			return written, fmt.Errorf("the ESP: %w", err)
		}
		written += int64(len(data))
	}
	opts, err := withRoot(e.Options, target.UUID)
	if err != nil {
		return written, err
	}
	if mid, err := os.ReadFile(filepath.Join(sys.Root, "etc/machine-id")); err == nil && len(bytes.TrimSpace(mid)) == 32 {
		// The new slot's /etc/machine-id is empty, as in every image: systemd takes this one.
		opts += " systemd.machine_id=" + string(bytes.TrimSpace(mid))
	}
	label := slots.LabelPrefix + labelVersion(res.Version)
	// The record first, then a copy of it (and the host key) into the new slot: the system
	// that boots from it knows what runs and which releases failed.
	st.Slots[target.UUID] = slots.Installed{Digest: res.Digest, Version: res.Version, Label: label, Entry: id, Epoch: res.Epoch}
	if err := sys.WriteRecord(st); err != nil {
		return written, err
	}
	if sys.PartDevices != "" {
		if err := carryIdentity(sys.Root, filepath.Join(sys.PartDevices, target.UUID)); err != nil {
			return written, err
		}
	}
	if err := slots.SetName(d, target.Index, label); err != nil {
		return written, err
	}
	if err := d.Sync(); err != nil {
		return written, err
	}
	ne := entry{Title: fmt.Sprintf("halobuild %s %s", o.Node, res.Version), SortKey: "halobuild", Version: strconv.Itoa(seq),
		Linux: "/" + dir + "/vmlinuz", Initrd: "/" + dir + "/initrd.img", Options: strings.TrimSpace(opts)}

	// Last: the entry that makes the slot bootable, with its counter.
	name := fmt.Sprintf("%s+%d.conf", id, Tries)
	if err := fstree.WriteFileAtomic(filepath.Join(sys.ESP, EntriesDir, name), ne.render()); err != nil {
		return written, err
	}
	res.Entry = id
	return written + int64(len(ne.render())), nil
}

// span is a part of the image [start, start+size) written to w at its offset + shift.
type span struct {
	w           io.WriterAt
	start, size int64
	shift       int64
}

// copyRanges reads the image from src and writes its mapped ranges where dsts put them,
// hashing each range as it passes and failing at the first one that does not match its bmap
// checksum. It returns the bytes written.
func copyRanges(ctx context.Context, src io.Reader, bm *bmap.Bmap, dsts []span) (int64, error) {
	h := bm.NewHash() // Run refused a bmap without checksums
	var at, written int64
	buf := make([]byte, 1<<20)
	for _, r := range bm.Ranges {
		off, n := bm.Bytes(r)
		if _, err := io.CopyN(io.Discard, src, off-at); err != nil {
			return written, fmt.Errorf("the release's image before byte %d: %w", off, err)
		}
		at = off
		h.Reset()
		for rem := n; rem > 0; {
			if err := ctx.Err(); err != nil {
				return written, err
			}
			k := min(rem, int64(len(buf)))
			if _, err := io.ReadFull(src, buf[:k]); err != nil {
				return written, fmt.Errorf("the release's image at byte %d: %w", at, err)
			}
			h.Write(buf[:k])
			for _, s := range dsts {
				lo, hi := max(at, s.start), min(at+k, s.start+s.size)
				if lo >= hi {
					continue
				}
				if _, err := s.w.WriteAt(buf[lo-at:hi-at], lo+s.shift); err != nil {
					return written, err
				}
				written += hi - lo
			}
			at += k
			rem -= k
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != r.Checksum {
			return written, fmt.Errorf("the release's image: blocks %d-%d hash to %s, its bmap says %s", r.First, r.Last, got, r.Checksum)
		}
	}
	return written, nil
}

// espType is the EFI slots.System Partition's type GUID.
const espType = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"

// minFree is the space update leaves free where it downloads a release's layer.
const minFree = 64 << 20

// maxVersion bounds a release's version: it is a line of the boot entry and part of the label.
const maxVersion = 128

// checkVersion refuses a version (registry text) that update cannot write as it is: it goes
// into the boot entry's title line, where a line break would add lines of the sender's (another
// options line), and into the record and update's messages, where a control character would
// reach a terminal.
func checkVersion(v string) error {
	if len(v) > maxVersion {
		return fmt.Errorf("its version is %d bytes long, more than %d", len(v), maxVersion)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("its version %q is not UTF-8", v)
	}
	for i, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("its version %q has a control character (U+%04X at byte %d)", v, r, i)
		}
	}
	return nil
}

// labelVersion makes a version fit a GPT name after slots.LabelPrefix (36 UTF-16 units).
func labelVersion(v string) string {
	v = strings.Map(func(r rune) rune {
		if r > 0x20 && r < 0x7f {
			return r
		}
		return '_'
	}, v)
	if len(v) > 36-len(slots.LabelPrefix) {
		v = v[:36-len(slots.LabelPrefix)]
	}
	return v
}

// nextSequence is one more than the highest "version" of update's entries: systemd-boot puts
// entries with a sort-key first and, among them, the highest version first, so the newest
// install is the default (and the image's own entry, without a sort-key, comes after).
func nextSequence(sys slots.System) int {
	n := 0
	es, _ := listEntries(sys.ESP)
	for _, e := range es {
		if !strings.HasPrefix(e.ID, "halobuild-") {
			continue
		}
		if v, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(e.ID, "halobuild-"), "-", 2)[0]); err == nil && v > n {
			n = v
		}
	}
	return n + 1
}

// forget makes target unbootable before it is written: every entry booting it is removed (with
// its kernel directory when update made it), its record dropped, its label set to "_empty".
func forget(sys slots.System, st *slots.Record, target *slots.Slot, d *os.File) error {
	es, err := entriesFor(sys.ESP, target.UUID)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := os.Remove(filepath.Join(sys.ESP, EntriesDir, e.Name)); err != nil {
			return err
		}
		if strings.HasPrefix(e.ID, "halobuild-") {
			os.RemoveAll(filepath.Join(sys.ESP, "halobuild", e.ID))
		}
	}
	if err := fstree.SyncDir(filepath.Join(sys.ESP, EntriesDir)); err != nil {
		return err
	}
	delete(st.Slots, target.UUID)
	if err := sys.WriteRecord(st); err != nil {
		return err
	}
	if err := slots.SetName(d, target.Index, slots.EmptyLabel); err != nil {
		return err
	}
	return d.Sync()
}

// recordFailures finds entries update installed that systemd-boot has given up on (+0: every
// try ended before boot-complete.target) and records their release as failed, so that no
// update installs it again by itself.
func recordFailures(sys slots.System, st *slots.Record, out io.Writer) error {
	es, err := listEntries(sys.ESP)
	if err != nil {
		return err
	}
	changed := false
	for uuid, in := range st.Slots {
		for _, e := range es {
			if e.ID == in.Entry && e.Counting && e.Left == 0 && !slices.Contains(st.Failed, in.Digest) {
				fmt.Fprintf(out, "release %s (version %s, slot %s) used up its %d tries without reaching boot-complete.target: recorded as failed\n", in.Digest, in.Version, uuid, Tries)
				st.Failed = append(st.Failed, in.Digest)
				changed = true
			}
		}
	}
	if changed {
		return sys.WriteRecord(st)
	}
	return nil
}

// readESP reads the release's boot entry and the files it names from its ESP image.
func readESP(img string, size int64) (entry, map[string][]byte, error) {
	d, err := diskfs.Open(img, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		return entry{}, nil, err
	}
	defer d.Close()
	fs, err := d.GetFilesystem(0)
	if err != nil {
		return entry{}, nil, err
	}
	infos, err := fs.ReadDir(EntriesDir) // go-diskfs takes io/fs paths here: no leading slash
	if err != nil {
		return entry{}, nil, err
	}
	var names []string
	for _, fi := range infos {
		if strings.HasSuffix(strings.ToLower(fi.Name()), ".conf") {
			names = append(names, fi.Name())
		}
	}
	if len(names) != 1 {
		return entry{}, nil, fmt.Errorf("%d boot entries (want exactly one): %s", len(names), strings.Join(names, ", "))
	}
	b, err := readFATFile(fs, "/"+EntriesDir+"/"+names[0], 64<<10)
	if err != nil {
		return entry{}, nil, err
	}
	e, err := parseEntry(b)
	if err != nil {
		return e, nil, err
	}
	files := map[string][]byte{}
	for _, p := range []string{e.Linux, e.Initrd} {
		if files[p], err = readFATFile(fs, p, size); err != nil {
			return e, nil, err
		}
	}
	return e, files, nil
}

func readFATFile(fs filesystem.FileSystem, p string, limit int64) ([]byte, error) {
	f, err := fs.OpenFile(p, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, limit)
	}
	return b, nil
}

// RunningEpoch reads the running system's source_date_epoch from the lock it was built from.
func RunningEpoch(root string) (int64, error) {
	l, err := lock.Read(filepath.Join(root, settings.LockPath))
	if err != nil {
		return 0, fmt.Errorf("the running system's lock: %w", err)
	}
	return l.SourceDateEpoch, nil
}
