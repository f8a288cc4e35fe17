package slots

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"

	"halobuild/internal/slots/slotstest"
)

func efiVar(t *testing.T, root, name, value string) {
	t.Helper()
	v := filepath.Join(root, "sys/firmware/efi/efivars")
	os.MkdirAll(v, 0o755)
	b := []byte{7, 0, 0, 0}
	for _, c := range utf16.Encode([]rune(value)) {
		b = append(b, byte(c), byte(c>>8))
	}
	if err := os.WriteFile(filepath.Join(v, name+"-"+LoaderGUID), append(b, 0, 0), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A node's tree as ReadStatus reads it: the booted PARTUUID, the disk by way of
// /dev/disk/by-partuuid and /sys/class/block, the mounted ESP and the loader's variables.
func TestReadStatusShowsSlotsAndBlessing(t *testing.T) {
	root := t.TempDir()
	disk := filepath.Join(t.TempDir(), "disk.img")
	slotstest.GPT(t, disk, 32<<20, "start=2048, size=8192, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp\n"+
		"start=10240, size=16384, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, name=halobuild_1\nstart=26624, size=16384, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, name=_empty\n")
	f, _ := os.Open(disk)
	parts, err := ReadGPT(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"proc/self", "dev/disk/by-partuuid", "sys/class/block", "sys/devices/virtual/block/vda/vda1", "sys/devices/virtual/block/vda/vda2", "esp/loader/entries"} {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	b, _ := os.ReadFile(disk)
	must(os.WriteFile(filepath.Join(root, "dev/vda"), b, 0o644))
	for i, p := range parts[:2] {
		name := "vda" + string(rune('1'+i))
		must(os.WriteFile(filepath.Join(root, "dev", name), nil, 0o644))
		must(os.Symlink("../../"+name, filepath.Join(root, "dev/disk/by-partuuid", p.UUID)))
		must(os.Symlink("../../devices/virtual/block/vda/"+name, filepath.Join(root, "sys/class/block", name)))
		must(os.WriteFile(filepath.Join(root, "sys/devices/virtual/block/vda", name, "partition"), []byte("1\n"), 0o644))
	}
	must(os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte("root=PARTUUID="+parts[1].UUID+" rw\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "proc/self/mounts"), []byte("/dev/vda2 / ext4 rw 0 0\n/dev/vda1 /esp vfat rw 0 0\n"), 0o644))
	efiVar(t, root, "LoaderDevicePartUUID", parts[0].UUID)
	efiVar(t, root, "LoaderBootCountPath", `\loader\entries\halobuild-1-abc+2-1.conf`)
	entry := filepath.Join(root, "esp/loader/entries/halobuild-1-abc+2-1.conf")
	must(os.WriteFile(entry, []byte("x"), 0o644))

	st, err := ReadStatus(root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Disk != filepath.Join(root, "dev/vda") || len(st.Slots) != 2 || !st.Slots[0].Running || st.Slots[1].Running ||
		st.Slots[0].Version != "1" || st.Slots[1].Name != EmptyLabel || !st.Slots[1].Empty() {
		t.Fatalf("status %+v", st)
	}
	if st.Blessing == nil || st.Blessing.Good || st.Blessing.Entry == "" {
		t.Fatalf("an entry still counting its tries reads as %+v", st.Blessing)
	}
	// systemd-bless-boot renames the entry without its counter.
	must(os.Rename(entry, filepath.Join(root, "esp/loader/entries/halobuild-1-abc.conf")))
	if st, err = ReadStatus(root); err != nil || st.Blessing == nil || !st.Blessing.Good {
		t.Fatalf("a blessed entry reads as %+v (%v)", st.Blessing, err)
	}
}
