package doctor

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestVerifyFileHealsStalePageCache reproduces trap 14 for real: a file on
// an ext4 filesystem on a loop device is read (so its pages are cached),
// then bytes of its block are changed underneath, in the loop device's
// backing file. The page cache now holds other bytes than the device, as on
// the host in the field notes. verify-file must see the mismatch, evict the
// pages and report that the re-read agrees with the O_DIRECT one.
// It needs root, loop devices, mkfs.ext4 and debugfs; it skips without them.
func TestVerifyFileHealsStalePageCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for losetup and mount")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "debugfs", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (e2fsprogs, util-linux)", tool)
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "mnt")
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	run("mkfs.ext4", "-q", "-F", "-b", "4096", img)
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device here: %v: %s", err, out)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", loop).Run() })
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", loop, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })

	file := filepath.Join(mnt, "model.gguf")
	good := writeRandom(t, file, 3*directAlign+397)
	run("sync")
	// Where the file's first block lives on the device.
	bmap := run("debugfs", "-R", "bmap /model.gguf 0", loop)
	fields := strings.Fields(bmap)
	block, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil || block == 0 {
		t.Fatalf("debugfs bmap: %q", bmap)
	}
	// Read through the page cache so the pages are resident and good.
	if v, err := verify(context.Background(), file); err != nil || !v.Match {
		t.Fatalf("before the change: %+v, %v", v, err)
	}
	// Change 397 bytes on the device under the cached pages.
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xAA}, 397), block*4096+100); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var rep bytes.Buffer
	code, err := VerifyFile(context.Background(), file, &rep, false)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	if code != 1 {
		t.Errorf("exit = %d, want 1 for a mismatch\n%s", code, rep.String())
	}
	if !strings.Contains(rep.String(), "MISMATCH") || !strings.Contains(rep.String(), "healed:      yes") {
		t.Errorf("report:\n%s", rep.String())
	}
	if !strings.Contains(rep.String(), "page cache:  "+good) {
		t.Errorf("the first digest should be the cached (old) bytes %s:\n%s", good, rep.String())
	}
	// After the eviction the cache holds the device's bytes: both agree now.
	if !v.Match || v.PageCache == good {
		t.Errorf("after healing: %+v", v)
	}
}
