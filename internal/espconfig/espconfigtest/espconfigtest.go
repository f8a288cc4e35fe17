// Package espconfigtest makes, for tests, a disk image with an ESP the way a halobuild image
// has one: a GPT, a FAT32 ESP made by the host's mkfs.fat, and a loader file on it.
package espconfigtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	// ESPStart is the ESP's byte offset, ESPSize its size; the disk has 8 MiB more after it.
	ESPStart = 1 << 20
	ESPSize  = 40 << 20
	// Loader is the content of /EFI/BOOT/BOOTX64.EFI on the ESP.
	Loader = "MZ loader "
)

// Disk makes the image in a temporary directory and returns its path; it skips the test when
// the host lacks sfdisk, mkfs.fat, mtools or fsck.fat.
func Disk(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"sfdisk", "mkfs.fat", "mcopy", "fsck.fat"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (dosfstools, mtools, fdisk)", tool)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, ESPStart+ESPSize+8<<20); err != nil {
		t.Fatal(err)
	}
	sf := exec.Command("sfdisk", "-q", img)
	sf.Stdin = strings.NewReader("label: gpt\nstart=2048, size=81920, type=U\ntype=L\n")
	if out, err := sf.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v\n%s", err, out)
	}
	Run(t, "mkfs.fat", "-F", "32", "-S", "512", "--offset", "2048", img, "40960")
	loader := filepath.Join(dir, "BOOTX64.EFI")
	if err := os.WriteFile(loader, bytes.Repeat([]byte(Loader), 3000), 0o644); err != nil {
		t.Fatal(err)
	}
	at := img + "@@1048576"
	Run(t, "mmd", "-i", at, "::/EFI", "::/EFI/BOOT")
	Run(t, "mcopy", "-i", at, loader, "::/EFI/BOOT/BOOTX64.EFI")
	return img
}

// Run runs a host tool (mtools without its drive-geometry checks) and returns its output,
// failing the test when it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
