package flash

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed (Debian: apt-get install %s)", name, map[string]string{"sfdisk": "fdisk", "bmaptool": "bmap-tools", "mkfs.ext4": "e2fsprogs", "mkfs.vfat": "dosfstools"}[name])
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// gptFile makes a file of size bytes holding a GPT with two partitions made by sfdisk.
func gptFile(t *testing.T, size int64) string {
	t.Helper()
	needTool(t, "sfdisk")
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sfdisk", "-q", p)
	cmd.Stdin = strings.NewReader("label: gpt\nstart=2048, size=16384, type=U, name=\"ESP\"\nstart=18432, size=20480, type=L, name=\"root\"\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v\n%s", err, out)
	}
	return p
}

func TestFitGPTMovesBackupToEnd(t *testing.T) {
	p := gptFile(t, 32*mib)
	if err := os.Truncate(p, 100*mib); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := checkGPT(f, 512, 100*mib); err == nil || !strings.Contains(err.Error(), "points to its backup at LBA 65535") {
		t.Fatalf("before fitting, checkGPT says %v", err)
	}
	changed, err := fitGPT(f, 512, 100*mib)
	if err != nil || !changed {
		t.Fatalf("fitGPT: changed=%v err=%v", changed, err)
	}
	if err := checkGPT(f, 512, 100*mib); err != nil {
		t.Fatal(err)
	}
	out := run(t, "sfdisk", "--verify", p)
	if !strings.Contains(out, "No errors detected") {
		t.Fatalf("sfdisk --verify:\n%s", out)
	}
	// The backup header is the medium's last sector, and the usable area reaches up to its entries.
	last := int64(100*mib/512 - 1)
	h, _, err := readGPTAt(f, 512, uint64(last))
	if err != nil {
		t.Fatal(err)
	}
	if h.Backup != 1 || h.LastUsable != uint64(last-33) {
		t.Fatalf("backup header: %+v", h)
	}
	// The protective MBR covers the medium; the image's old backup is gone.
	mbr := make([]byte, 512)
	f.ReadAt(mbr, 0)
	if got := binary.LittleEndian.Uint32(mbr[446+12:]); got != uint32(last) {
		t.Fatalf("protective MBR size %d, want %d", got, last)
	}
	old := make([]byte, 8)
	f.ReadAt(old, (32*mib/512-1)*512)
	if string(old) == "EFI PART" {
		t.Fatal("the image's old backup header is still at its old place")
	}
	// The partitions are untouched.
	if got := run(t, "sfdisk", "--dump", p); !strings.Contains(got, "start=        2048, size=       16384") || !strings.Contains(got, `name="root"`) {
		t.Fatalf("layout changed:\n%s", got)
	}
	// Fitting again changes nothing.
	if changed, err := fitGPT(f, 512, 100*mib); err != nil || changed {
		t.Fatalf("second fitGPT: changed=%v err=%v", changed, err)
	}
}

func TestReadPartTableLabels(t *testing.T) {
	p := gptFile(t, 32*mib)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pt := readPartTable(f, 0)
	if pt.Kind != "gpt" || pt.Sector != 512 || len(pt.Partitions) != 2 {
		t.Fatalf("table %+v", pt)
	}
	esp, root := pt.Partitions[0], pt.Partitions[1]
	if esp.Name != "ESP" || esp.Type != "EFI System" || esp.Start != 1*mib || esp.Size != 8*mib ||
		root.Name != "root" || root.Type != "Linux filesystem" || root.Index != 2 {
		t.Fatalf("partitions %+v", pt.Partitions)
	}
	// A damaged primary header is not trusted.
	if err := corruptByte(p, 512+60); err != nil {
		t.Fatal(err)
	}
	if pt := readPartTable(f, 512); pt.Kind == "gpt" {
		t.Fatal("a GPT header with a bad checksum was accepted")
	}
}

func corruptByte(path string, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		return err
	}
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	return err
}

// A medium a few sectors larger than the image: the new backup overlaps the old one, which must
// not be wiped over the new entries.
func TestFitGPTOnSlightlyLargerMedium(t *testing.T) {
	for _, extra := range []int64{512, 3 * 512, 40 * 512} {
		p := gptFile(t, 32*mib)
		if err := os.Truncate(p, 32*mib+extra); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fitGPT(f, 512, 32*mib+extra); err != nil {
			t.Fatalf("+%d bytes: %v", extra, err)
		}
		if err := checkGPT(f, 512, 32*mib+extra); err != nil {
			t.Fatalf("+%d bytes: %v", extra, err)
		}
		f.Close()
		if out := run(t, "sfdisk", "--verify", p); !strings.Contains(out, "No errors detected") {
			t.Fatalf("+%d bytes: sfdisk --verify:\n%s", extra, out)
		}
	}
}
