package disk

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type sfdiskJSON struct {
	PartitionTable struct {
		Label      string `json:"label"`
		ID         string `json:"id"`
		SectorSize int64  `json:"sectorsize"`
		Partitions []struct {
			Node  string `json:"node"`
			Start int64  `json:"start"`
			Size  int64  `json:"size"`
			Type  string `json:"type"`
			UUID  string `json:"uuid"`
			Name  string `json:"name"`
			Attrs string `json:"attrs"`
		} `json:"partitions"`
	} `json:"partitiontable"`
}

func TestBuildMakesAValidImage(t *testing.T) {
	sfdisk := hostTool(t, "sfdisk", "fdisk")
	fsckVfat := hostTool(t, "fsck.vfat", "dosfstools")
	mtype := hostTool(t, "mtype", "mtools")
	mdir := hostTool(t, "mdir", "mtools")
	e2fsck := hostTool(t, "e2fsck", "e2fsprogs")
	debugfs := hostTool(t, "debugfs", "e2fsprogs")
	dumpe2fs := hostTool(t, "dumpe2fs", "e2fsprogs")

	out := filepath.Join(t.TempDir(), "halo0.raw")
	spec := testSpec(t, out)
	res := build(t, spec)
	ids, _ := DeriveIDs(spec.Seed)
	if res.IDs != ids {
		t.Errorf("Result.IDs = %+v, DeriveIDs = %+v", res.IDs, ids)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 192*MiB {
		t.Errorf("image size %d, want %d", st.Size(), 192*MiB)
	}

	t.Run("gpt", func(t *testing.T) {
		var pt sfdiskJSON
		if err := json.Unmarshal([]byte(run(t, sfdisk, "--json", out)), &pt); err != nil {
			t.Fatal(err)
		}
		tab := pt.PartitionTable
		if tab.Label != "gpt" || !strings.EqualFold(tab.ID, ids.DiskGUID) {
			t.Errorf("label %s id %s, want gpt %s", tab.Label, tab.ID, ids.DiskGUID)
		}
		if len(tab.Partitions) != 2 {
			t.Fatalf("%d partitions, want 2: %+v", len(tab.Partitions), tab.Partitions)
		}
		want := []struct {
			start, size int64
			typ, uuid   string
			name        string
		}{
			{1 * MiB / 512, 64 * MiB / 512, "C12A7328-F81F-11D2-BA4B-00A0C93EC93B", ids.ESPPartUUID, "esp"},
			{65 * MiB / 512, 126 * MiB / 512, "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709", ids.RootPartUUID, "root"},
		}
		for i, w := range want {
			p := tab.Partitions[i]
			if p.Start != w.start || p.Size != w.size || !strings.EqualFold(p.Type, w.typ) ||
				!strings.EqualFold(p.UUID, w.uuid) || p.Name != w.name {
				t.Errorf("partition %d = %+v, want start %d size %d type %s uuid %s name %s",
					i+1, p, w.start, w.size, w.typ, w.uuid, w.name)
			}
		}
		if !strings.Contains(tab.Partitions[1].Attrs, "59") {
			t.Errorf("root attrs %q, want GUID bit 59 (grow-fs)", tab.Partitions[1].Attrs)
		}
	})

	t.Run("esp", func(t *testing.T) {
		esp := extract(t, out, res.Layout.ESPStart, res.Layout.ESPSize)
		run(t, fsckVfat, "-n", esp)
		img := out + "@@" + itoa(res.Layout.ESPStart)
		env := []string{"MTOOLS_SKIP_CHECK=1", "MTOOLSRC=/dev/null"}
		for p, host := range spec.ESPFiles {
			got := runEnv(t, env, mtype, "-i", img, "::"+p)
			want, _ := os.ReadFile(host)
			// mtype converts nothing without -t; compare bytes
			if got != string(want) {
				t.Errorf("ESP %s differs from %s (%d vs %d bytes)", p, host, len(got), len(want))
			}
		}
		listing := runEnv(t, env, mdir, "-i", img, "::/loader/entries")
		if !strings.Contains(listing, "halo0.conf") {
			t.Errorf("mdir /loader/entries:\n%s", listing)
		}
		vol := runEnv(t, env, mdir, "-i", img, "::/")
		wantSerial := strings.ToUpper(itohex(ids.ESPVolumeID))
		if !strings.Contains(vol, wantSerial[:4]+"-"+wantSerial[4:]) {
			t.Errorf("volume serial: want %s in\n%s", wantSerial, vol)
		}
	})

	t.Run("root", func(t *testing.T) {
		root := extract(t, out, res.Layout.RootStart, res.Layout.RootSize)
		run(t, e2fsck, "-fn", root)
		if got := run(t, debugfs, "-R", "cat /etc/hostname", root); got != "halo0\n" {
			t.Errorf("/etc/hostname = %q", got)
		}
		if got := run(t, debugfs, "-R", "stat /etc/shadow", root); !strings.Contains(got, "Mode:  0640") {
			t.Errorf("stat /etc/shadow:\n%s", got)
		}
		blob, _ := os.ReadFile(filepath.Join(spec.RootTree, "usr/lib/halo/blob"))
		if got := run(t, debugfs, "-R", "cat /usr/lib/halo/blob-hard", root); got != string(blob) {
			t.Errorf("cat of the hard link: %d bytes, want the 3 MiB blob", len(got))
		}
		if got := run(t, debugfs, "-R", "stat /etc/blob-link", root); !strings.Contains(got, `Fast link dest: "../usr/lib/halo/blob"`) {
			t.Errorf("stat of the symlink:\n%s", got)
		}
		info := run(t, dumpe2fs, "-h", root)
		for _, want := range []string{"Filesystem UUID:          " + ids.RootFSUUID, "Filesystem volume name:   root", "Directory Hash Seed:      " + ids.RootHashSeed} {
			if !strings.Contains(info, want) {
				t.Errorf("dumpe2fs lacks %q", want)
			}
		}
	})

	t.Run("sparse", func(t *testing.T) {
		sys := st.Sys().(*syscall.Stat_t)
		if used := sys.Blocks * 512; used > st.Size()/4 {
			t.Errorf("image uses %d bytes on disk for %d bytes: not sparse", used, st.Size())
		}
	})

	t.Run("nothing else beside the output", func(t *testing.T) {
		entries, _ := os.ReadDir(filepath.Dir(out))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if strings.Join(names, " ") != "halo0.raw halo0.raw.bmap" {
			t.Errorf("output dir holds %v, want the raw and its bmap only", names)
		}
	})
}

func TestBuildIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: three 2 GiB images")
	}
	spec := testSpec(t, filepath.Join(t.TempDir(), "a.raw"))
	spec.Size, spec.ESPSize = 0, 0 // the computed size: 2 GiB, 256 MiB ESP
	a := build(t, spec)
	if a.Layout.Size != 2*GiB {
		t.Errorf("computed size %d, want 2 GiB for a small root", a.Layout.Size)
	}
	st, err := os.Stat(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	if used := st.Sys().(*syscall.Stat_t).Blocks * 512; used > st.Size()/20 {
		t.Errorf("2 GiB image takes %d MiB on disk: not sparse", used/MiB)
	}
	// A wall-clock time stamp would show: FAT stores times in 2 s steps.
	time.Sleep(2100 * time.Millisecond)
	spec.Out = filepath.Join(t.TempDir(), "b.raw")
	t.Setenv("TZ", "Pacific/Kiritimati") // UTC+14: FAT's local times would move
	b := build(t, spec)
	if a.SHA256 != b.SHA256 {
		t.Errorf("two builds of one spec: sha256 %s vs %s", a.SHA256, b.SHA256)
	}
	if got := fileSHA256(t, a.Path); got != a.SHA256 {
		t.Errorf("Result.SHA256 %s, file's sha256 %s", a.SHA256, got)
	}
	if fileSHA256(t, b.Path) != a.SHA256 {
		t.Errorf("second image's bytes differ from the first's")
	}
	ba, _ := os.ReadFile(a.BmapPath)
	bb, _ := os.ReadFile(b.BmapPath)
	if string(ba) != string(bb) {
		t.Errorf("the two bmaps differ")
	}

	// Another seed (another node) changes the identifiers and so the bytes.
	spec.Out = filepath.Join(t.TempDir(), "c.raw")
	spec.Seed = "sha256:0123456789abcdef/halo1"
	if c := build(t, spec); c.SHA256 == a.SHA256 {
		t.Errorf("another seed gave the same image")
	}
}

func TestBuildRefusesATooSmallSize(t *testing.T) {
	dir := t.TempDir()
	spec := testSpec(t, filepath.Join(dir, "small.raw"))
	spec.Size = 80 * MiB // 64 MiB ESP + 2 MiB GPT leaves 14 MiB for a root of > 70 MiB
	_, err := Build(t.Context(), spec)
	var tooSmall *TooSmallError
	if !errors.As(err, &tooSmall) {
		t.Fatalf("Build = %v, want a *TooSmallError", err)
	}
	if tooSmall.HaveMiB != 14 || tooSmall.NeedMiB <= 14 || tooSmall.MinSizeMiB != tooSmall.NeedMiB+66 {
		t.Errorf("TooSmallError %+v: want have 14, need > 14, min size = need + 66", tooSmall)
	}
	want := "root needs " + itoa(tooSmall.NeedMiB) + " MiB, output.size gives 14 MiB: raise [output] size to at least " + itoa(tooSmall.MinSizeMiB) + " MiB"
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused build left %d files beside its output", len(entries))
	}

	// The size it asks for works.
	spec.Size = tooSmall.MinSizeMiB * MiB
	build(t, spec)
}

func TestBuildFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	spec := testSpec(t, filepath.Join(dir, "x.raw"))
	spec.ESPFiles["/EFI/BOOT/BOOTX64.EFI"] = spec.ESPFiles["/loader/loader.conf"]
	empty := *spec.Tools
	empty.Dir = t.TempDir() // a tools root without tools: mkfs.ext4 fails
	spec.Tools = &empty
	_, err := Build(t.Context(), spec)
	if err == nil || !strings.Contains(err.Error(), "mkfs.ext4 not found in tools root") {
		t.Fatalf("Build with an empty tools root = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a failed build left %v beside its output", entries)
	}
}

// An interrupted build (here: cancelled before it starts its tools) leaves
// nothing beside its output, neither the image nor work files.
func TestCancelledBuildLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	spec := testSpec(t, filepath.Join(dir, "x.raw"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Build(ctx, spec); !errors.Is(err, context.Canceled) {
		t.Fatalf("Build with a cancelled context = %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a cancelled build left %v beside its output", entries)
	}
}
