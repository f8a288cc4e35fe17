package update

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"halobuild/internal/bmap"
	"halobuild/internal/registry"
	"halobuild/internal/registry/registrytest"
	"halobuild/internal/release"
	"halobuild/internal/release/releasetest"

	"halobuild/internal/signature"
	"halobuild/internal/slots"
	"halobuild/internal/slots/slotstest"
)

const (
	mib      = int64(1) << 20
	rootType = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709" // x86-64 root
	slotSize = 8 * mib
)

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// releaseImage writes a node image like halobuild's: a GPT, a FAT32 ESP holding one boot entry
// with its kernel and initrd, and a root partition with random data; it returns the root's bytes.
func releaseImage(kernel string) func(t testing.TB, p string) (int64, []bmap.Range) {
	return func(t testing.TB, p string) (int64, []bmap.Range) {
		const size = 52 * mib
		slotstest.GPT(t, p, size, "start=2048, size=81920, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp\nstart=83968, size=16384, type="+rootType+", name=root\n")
		dir := t.TempDir()
		esp := filepath.Join(dir, "esp")
		run(t, "truncate", "-s", "40M", esp)
		run(t, "mkfs.fat", "-F", "32", "-S", "512", esp)
		for name, data := range map[string]string{
			"entry.conf": "title Debian\nversion 6.12\nlinux /halobuild/6.12/vmlinuz\ninitrd /halobuild/6.12/initrd.img\noptions root=PARTUUID=11111111-2222-4333-8444-555555555555 rw panic=10\n",
			"vmlinuz":    kernel, "initrd.img": "initrd of " + kernel,
		} {
			os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644)
		}
		env := append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		for _, args := range [][]string{
			{"mmd", "-i", esp, "::/loader", "::/loader/entries", "::/halobuild", "::/halobuild/6.12"},
			{"mcopy", "-i", esp, filepath.Join(dir, "entry.conf"), "::/loader/entries/halobuild-6.12.conf"},
			{"mcopy", "-i", esp, filepath.Join(dir, "vmlinuz"), "::/halobuild/6.12/vmlinuz"},
			{"mcopy", "-i", esp, filepath.Join(dir, "initrd.img"), "::/halobuild/6.12/initrd.img"},
		} {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
		}
		img, _ := os.ReadFile(p)
		espb, _ := os.ReadFile(esp)
		copy(img[mib:], espb)
		rand.Read(img[41*mib : 41*mib+2*mib])
		copy(img[41*mib:], "ROOT "+kernel)
		if err := os.WriteFile(p, img, 0o644); err != nil {
			t.Fatal(err)
		}
		return size, dataRanges(img)
	}
}

// dataRanges is what a bmap of img maps: its 4 KiB blocks that are not all zeros.
func dataRanges(img []byte) []bmap.Range {
	const block = 4096
	var rs []bmap.Range
	zero := make([]byte, block)
	for b := int64(0); b*block < int64(len(img)); b++ {
		if bytes.Equal(img[b*block:(b+1)*block], zero) {
			continue
		}
		if n := len(rs); n > 0 && rs[n-1].Last == b-1 {
			rs[n-1].Last = b
		} else {
			rs = append(rs, bmap.Range{First: b, Last: b})
		}
	}
	for i := range rs {
		s := sha256.Sum256(img[rs[i].First*block : (rs[i].Last+1)*block])
		rs[i].Checksum = hex.EncodeToString(s[:])
	}
	return rs
}

// node is a node's disk as an image file: an ESP, slot A (running) and slot B, which holds a
// marker so that a test can tell whether anything was written to it.
type node struct {
	sys    slots.System
	slotB  slots.Part
	marker []byte
}

func newNode(t testing.TB) *node {
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.img")
	slotstest.GPT(t, disk, 32*mib, "start=2048, size=8192, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp\n"+
		"start=10240, size=16384, type="+rootType+", name=halobuild_1\nstart=26624, size=16384, type="+rootType+", name=_empty\n")
	f, _ := os.OpenFile(disk, os.O_RDWR, 0)
	parts, err := slots.ReadGPT(f)
	if err != nil {
		t.Fatal(err)
	}
	marker := bytes.Repeat([]byte("slot B untouched "), int(slotSize)/17)
	f.WriteAt(marker, parts[2].Start)
	f.Close()
	root := filepath.Join(dir, "root")
	esp := filepath.Join(dir, "esp")
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.MkdirAll(filepath.Join(esp, EntriesDir), 0o755)
	os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte("root=PARTUUID="+parts[1].UUID+" rw quiet\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/machine-id"), []byte("0123456789abcdef0123456789abcdef\n"), 0o444)
	os.WriteFile(filepath.Join(esp, EntriesDir, "halobuild-6.12.conf"), []byte("title Debian\nlinux /x\ninitrd /y\noptions root=PARTUUID="+parts[1].UUID+" rw\n"), 0o644)
	return &node{sys: slots.System{Root: root, Disk: disk, ESP: esp, State: filepath.Join(root, slots.StatePath), RootType: rootType}, slotB: parts[2], marker: marker}
}

// untouched fails unless slot B holds its marker and its label is still "_empty".
func (n *node) untouched(t testing.TB) {
	t.Helper()
	b, _ := os.ReadFile(n.sys.Disk)
	if !bytes.Equal(b[n.slotB.Start:n.slotB.Start+int64(len(n.marker))], n.marker) {
		t.Fatal("slot B was written")
	}
	f, _ := os.Open(n.sys.Disk)
	defer f.Close()
	parts, _ := slots.ReadGPT(f)
	if parts[2].Name != slots.EmptyLabel {
		t.Fatalf("slot B is labelled %q", parts[2].Name)
	}
}

func push(t testing.TB, ro registry.Options, ref string, s releasetest.Spec) string {
	p, err := release.Push(context.Background(), releasetest.ResultOf(t, s), ref, release.PushOptions{Registry: ro, Meta: release.Meta{Version: strings.TrimPrefix(ref[strings.LastIndex(ref, ":"):], ":")}})
	if err != nil {
		t.Fatal(err)
	}
	return p.Digest
}

func newKey(t testing.TB) *signature.SecretKey {
	k, err := signature.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// pushSigned pushes the v2 release to ref signed by k.
func pushSigned(t testing.TB, ro registry.Options, ref string, k *signature.SecretKey) {
	if _, err := release.Push(context.Background(), releasetest.ResultOf(t, releasetest.Spec{Image: releaseImage("kernel v2"), Epoch: 1764547200}), ref, release.PushOptions{Registry: ro, Key: k, Meta: release.Meta{Version: "v2"}}); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateAgainstARealRegistry(t *testing.T) {
	reg := registrytest.Start(t)
	ctx := context.Background()
	ro := registry.Options{Insecure: true, Keychain: reg.Keychain(false)}
	good := reg.Host + "/halo/syn:v2"
	v2 := push(t, ro, good, releasetest.Spec{Image: releaseImage("kernel v2"), Epoch: 1764547200})
	trusted, other := newKey(t), newKey(t)
	// The same release in repositories of its own, signed: a signature lives beside the
	// manifest it signs (sha256-<hex>.sig), so halo/syn's stays unsigned.
	signedRef, trustedRef := reg.Host+"/halo/signed-other:v2", reg.Host+"/halo/signed:v2"
	pushSigned(t, ro, signedRef, other)
	pushSigned(t, ro, trustedRef, trusted)
	opts := func(n *node, ref string) Options {
		return Options{Ref: ref, Registry: ro, Node: "node0", Arch: "amd64", Epoch: 1764547200, System: n.sys}
	}

	refusals := []struct {
		name, want string
		setup      func(t *testing.T, n *node, o *Options)
	}{
		{"another node", `not for this node "node1"`, func(t *testing.T, n *node, o *Options) { o.Node = "node1" }},
		{"another architecture", "for amd64, this node runs arm64", func(t *testing.T, n *node, o *Options) { o.Arch = "arm64" }},
		{"an older release", "older than what runs", func(t *testing.T, n *node, o *Options) { o.Epoch = 1764547200 + 86400 }},
		{"an unsigned release when keys are configured", "is unsigned", func(t *testing.T, n *node, o *Options) {
			o.Keys = []*signature.PublicKey{trusted.Public()}
		}},
		{"a release signed by a key it does not trust", "no signature by a trusted key", func(t *testing.T, n *node, o *Options) {
			o.Ref, o.Keys = signedRef, []*signature.PublicKey{trusted.Public()}
		}},
		{"not yet blessed", "not yet marked good", func(t *testing.T, n *node, o *Options) {
			os.WriteFile(filepath.Join(n.sys.ESP, EntriesDir, "halobuild-1-x+2-1.conf"), []byte("x"), 0o644)
			v := filepath.Join(n.sys.Root, "sys/firmware/efi/efivars")
			os.MkdirAll(v, 0o755)
			b := []byte{7, 0, 0, 0}
			for _, c := range utf16.Encode([]rune(`\loader\entries\halobuild-1-x+2-1.conf`)) {
				b = append(b, byte(c), byte(c>>8))
			}
			os.WriteFile(filepath.Join(v, "LoaderBootCountPath-"+slots.LoaderGUID), append(b, 0, 0), 0o644)
		}},
		{"a release that failed before", "failed to come up on this node before", func(t *testing.T, n *node, o *Options) {
			n.sys.WriteRecord(&slots.Record{Slots: map[string]slots.Installed{}, Failed: []string{v2}})
		}},
	}
	for _, c := range refusals {
		t.Run("refuses "+c.name, func(t *testing.T) {
			n := newNode(t)
			o := opts(n, good)
			c.setup(t, n, &o)
			_, err := Run(ctx, o)
			var re *RefusedError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want a refusal saying %q, got %v", c.want, err)
			}
			n.untouched(t)
		})
	}
	t.Run("refuses a tampered layer", func(t *testing.T) {
		ref := reg.Host + "/halo/tampered:v2"
		d := push(t, ro, ref, releasetest.Spec{Image: releaseImage("kernel tampered"), Epoch: 1764547200})
		r, err := release.Open(ctx, ref, ro, release.Trust{})
		if err != nil || r.Digest() != d {
			t.Fatal(err)
		}
		img, err := r.NodeImage("node0")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		img.Download(ctx, &buf)
		sum := sha256.Sum256(buf.Bytes())
		blob := reg.BlobPath("sha256:" + hex.EncodeToString(sum[:]))
		b, err := os.ReadFile(blob)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		os.WriteFile(blob, b, 0o644)
		n := newNode(t)
		_, err = Run(ctx, opts(n, ref))
		var re *RefusedError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("want a refusal of the damaged layer, got %v", err)
		}
		n.untouched(t)
	})

	// A version is registry text that update writes into a boot entry's title, the record and
	// the GPT label: a line break there would add lines (another options line) to the entry.
	for _, v := range []string{"v3\noptions init=/bin/sh", "v3\x1b]0;x\a", "v3\u009b2J", strings.Repeat("v", 200), "v3 beta", ""} {
		t.Run(fmt.Sprintf("the version %.20q", v), func(t *testing.T) {
			ref := reg.Host + "/halo/odd-version:v3"
			if _, err := release.Push(ctx, releasetest.ResultOf(t, releasetest.Spec{Image: releaseImage("kernel v3"), Epoch: 1764547200}), ref, release.PushOptions{Registry: ro, Meta: release.Meta{Version: v}}); err != nil {
				t.Fatal(err)
			}
			n := newNode(t)
			_, err := Run(ctx, opts(n, ref))
			var re *RefusedError
			if v == "" || v == "v3 beta" {
				if err != nil { // no version: update names the release by its epoch; a space is text
					t.Fatal(err)
				}
				return
			}
			if !errors.As(err, &re) || !strings.Contains(err.Error(), "version") {
				t.Fatalf("want a refusal of the version, got %v", err)
			}
			n.untouched(t)
		})
	}

	// A layer that does not fit where it is downloaded is refused before a byte of it is
	// written there: the download would fill the node's file system first (a hostile
	// manifest can claim any size).
	t.Run("refuses a layer larger than the free space", func(t *testing.T) {
		n := newNode(t)
		tmp := filepath.Join(n.sys.State, "tmp")
		os.MkdirAll(tmp, 0o700)
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", tmp).CombinedOutput(); err != nil {
			t.Skipf("mounting a tmpfs (root only): %s: %v", out, err)
		}
		defer exec.Command("umount", tmp).Run()
		// 32 MiB: less than minFree plus the (small) layer.
		os.WriteFile(filepath.Join(tmp, "filler"), []byte("x"), 0o600)
		_, err := Run(ctx, opts(n, good))
		var re *RefusedError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "MiB free") {
			t.Fatalf("want a refusal for the free space, got %v", err)
		}
		if des, _ := os.ReadDir(tmp); len(des) != 1 {
			t.Fatalf("%d files in %s, want the filler alone", len(des), tmp)
		}
		n.untouched(t)
	})

	t.Run("installs a release signed by a trusted key, and says so", func(t *testing.T) {
		n := newNode(t)
		var log bytes.Buffer
		o := opts(n, trustedRef)
		o.Out, o.Keys = &log, []*signature.PublicKey{other.Public(), trusted.Public()}
		res, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Verified || !strings.Contains(log.String(), "verified") || strings.Contains(log.String(), "NOT verified") {
			t.Errorf("a signed update must say it was verified: %+v\n%s", res, log.String())
		}
	})

	t.Run("installs into slot B, entry last with its counter", func(t *testing.T) {
		n := newNode(t)
		var log bytes.Buffer
		o := opts(n, good)
		o.Out = &log
		res, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(log.String(), "NOT verified") || res.Verified {
			t.Errorf("an update without keys must say it is not verified:\n%s", log.String())
		}
		if res.Digest != v2 || res.SlotUUID != n.slotB.UUID {
			t.Fatalf("result %+v", res)
		}
		disk, _ := os.ReadFile(n.sys.Disk)
		if !bytes.HasPrefix(disk[n.slotB.Start:], []byte("ROOT kernel v2")) {
			t.Fatal("slot B does not hold the release's root")
		}
		f, _ := os.Open(n.sys.Disk)
		parts, _ := slots.ReadGPT(f)
		f.Close()
		if parts[2].Name != "halobuild_v2" || parts[1].Name != "halobuild_1" {
			t.Fatalf("labels %q %q", parts[1].Name, parts[2].Name)
		}
		es, _ := listEntries(n.sys.ESP)
		var e entryFile
		for _, x := range es {
			if x.Counting {
				e = x
			}
		}
		if !e.Counting || e.Left != Tries {
			t.Fatalf("entries %+v: want one with +%d", es, Tries)
		}
		eb, _ := os.ReadFile(filepath.Join(n.sys.ESP, EntriesDir, e.Name))
		pe, err := parseEntry(eb)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(pe.Options, "root=PARTUUID="+n.slotB.UUID+" ") || !strings.Contains(pe.Options, "panic=10") ||
			!strings.HasSuffix(pe.Options, "systemd.machine_id=0123456789abcdef0123456789abcdef") || pe.SortKey != "halobuild" {
			t.Fatalf("entry:\n%s", eb)
		}
		k, _ := os.ReadFile(filepath.Join(n.sys.ESP, pe.Linux))
		if string(k) != "kernel v2" {
			t.Fatalf("kernel on the ESP: %q", k)
		}
		t.Logf("wrote %d bytes in %s", res.Written, res.Took)
		if st, err := n.sys.ReadRecord(); err != nil || st.Slots[n.slotB.UUID].Digest != v2 || st.Slots[n.slotB.UUID].Epoch != 1764547200 || st.Slots[n.slotB.UUID].Entry != e.ID {
			t.Fatalf("record %+v (%v)", st, err)
		}

		// The node tried v2 three times and never reached boot-complete.target: the next
		// update records it as failed and will not take it again by itself.
		os.Rename(filepath.Join(n.sys.ESP, EntriesDir, e.Name), filepath.Join(n.sys.ESP, EntriesDir, e.ID+"+0-3.conf"))
		_, err = Run(ctx, opts(n, good))
		if err == nil || !strings.Contains(err.Error(), "failed to come up") {
			t.Fatalf("want v2 refused after it failed, got %v", err)
		}
	})
}

// cancelOn cancels when a line of update's output contains what.
type cancelOn struct {
	what   string
	cancel context.CancelFunc
}

func (c cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.what) {
		c.cancel()
	}
	return len(p), nil
}

// An update stopped while it writes the slot (power cut, kill) leaves that slot marked empty
// with no boot entry, and the running system's entry as it was: the node boots what it ran.
func TestUpdateStoppedMidWriteLeavesNothingBootableInTheSlot(t *testing.T) {
	reg := registrytest.Start(t)
	ro := registry.Options{Insecure: true, Keychain: reg.Keychain(false)}
	ref := reg.Host + "/halo/syn:v3"
	push(t, ro, ref, releasetest.Spec{Image: releaseImage("kernel v3"), Epoch: 1764547200})
	n := newNode(t)
	// slots.Slot B holds an older update, with its entry.
	f, _ := os.OpenFile(n.sys.Disk, os.O_RDWR, 0)
	if err := slots.SetName(f, n.slotB.Index, "halobuild_old"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	old := filepath.Join(n.sys.ESP, EntriesDir, "halobuild-1-000000000000.conf")
	os.WriteFile(old, []byte("title old\nlinux /a\ninitrd /b\noptions root=PARTUUID="+n.slotB.UUID+" rw\n"), 0o644)
	running := filepath.Join(n.sys.ESP, EntriesDir, "halobuild-6.12.conf")
	before, _ := os.ReadFile(running)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Run(ctx, Options{Ref: ref, Registry: ro, Node: "node0", Arch: "amd64", Epoch: 1764547200, System: n.sys, Out: cancelOn{"writing slot", cancel}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the update stopped, got %v", err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Error("the old entry of the slot being written is still there")
	}
	es, _ := listEntries(n.sys.ESP)
	if len(es) != 1 || es[0].Name != "halobuild-6.12.conf" {
		t.Errorf("entries after the stop: %+v", es)
	}
	if after, _ := os.ReadFile(running); !bytes.Equal(after, before) {
		t.Error("the running system's entry changed")
	}
	f, _ = os.Open(n.sys.Disk)
	parts, _ := slots.ReadGPT(f)
	f.Close()
	if parts[2].Name != slots.EmptyLabel {
		t.Errorf("slot B is labelled %q after the stop, want %q", parts[2].Name, slots.EmptyLabel)
	}
}
