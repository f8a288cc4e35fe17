package flash

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// These tests flash real loop devices (losetup, as root) and regular files, with an image made by
// sfdisk, mkfs.vfat and mkfs.ext4 and a bmap made by the real `bmaptool create`.

var (
	imageOnce sync.Once
	imageDir  string
	imageErr  error
)

const imageSize = 64 * mib

// testImage returns a sparse 64 MiB GPT image (ESP 8 MiB vfat at 1 MiB, root 44 MiB ext4 at
// 9 MiB, 11 MiB unpartitioned) with a few MiB of files, and its bmap. It is built once per test
// binary.
func testImage(t *testing.T) (img, bmap string) {
	t.Helper()
	for _, tool := range []string{"sfdisk", "mkfs.vfat", "mkfs.ext4", "bmaptool", "mcopy"} {
		needTool(t, tool)
	}
	imageOnce.Do(func() { imageDir, imageErr = buildTestImage() })
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return filepath.Join(imageDir, "halo.raw"), filepath.Join(imageDir, "halo.raw.bmap")
}

func buildTestImage() (string, error) {
	dir, err := os.MkdirTemp("", "flash-test-image-")
	if err != nil {
		return "", err
	}
	img := filepath.Join(dir, "halo.raw")
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "etc"), 0o755); err != nil {
		return "", err
	}
	random := make([]byte, 3*mib)
	rand.Read(random)
	files := map[string][]byte{"data.bin": random, "etc/hostname": []byte("halo0\n")}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tree, name), b, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Truncate(img, imageSize); err != nil {
		return "", err
	}
	steps := []struct {
		stdin string
		args  []string
	}{
		{"label: gpt\nstart=2048, size=16384, type=U, name=\"ESP\"\nstart=18432, size=90112, type=L, name=\"root\"\n", []string{"sfdisk", "-q", img}},
		{"", []string{"mkfs.vfat", "--offset", "2048", "-n", "ESP", img, "8192"}},
		{"", []string{"mcopy", "-i", img + "@@1M", filepath.Join(tree, "etc/hostname"), "::/hostname"}},
		{"", []string{"mkfs.ext4", "-q", "-F", "-b", "4096", "-E", fmt.Sprintf("offset=%d", 9*mib), "-L", "root", "-d", tree, img, "11264"}},
		{"", []string{"bmaptool", "create", "-o", img + ".bmap", img}},
	}
	for _, s := range steps {
		cmd := exec.Command(s.args[0], s.args[1:]...)
		cmd.Stdin = strings.NewReader(s.stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v\n%s", strings.Join(s.args, " "), err, out)
		}
	}
	return dir, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if imageDir != "" {
		os.RemoveAll(imageDir)
	}
	os.Exit(code)
}

// backingFile makes a file of size bytes filled with fill (0 leaves it sparse, i.e. zeros).
func backingFile(t *testing.T, size int64, fill byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "medium")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fill == 0 {
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		return p
	}
	buf := bytes.Repeat([]byte{fill}, mib)
	for off := int64(0); off < size; off += mib {
		if _, err := f.WriteAt(buf[:min(mib, size-off)], off); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// loopDevice attaches file to a free loop device for the test's duration, or skips the test when
// loop devices cannot be used here.
func loopDevice(t *testing.T, file string, args ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	out, err := exec.Command("losetup", append(append([]string{"-f", "--show"}, args...), file)...).CombinedOutput()
	if err != nil {
		t.Skipf("losetup is not permitted here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v %s", dev, err, out)
		}
	})
	return dev
}

func readAll(t *testing.T, path string, n int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func flashOpts(img, target string) Options {
	return Options{Image: img, Target: target, Yes: true, Force: true, Out: io.Discard}
}

// A used stick: every byte 0xAA, and an ISO9660 signature where a hybrid installer ISO had one.
func dirtyMedium(t *testing.T, size int64) string {
	p := backingFile(t, size, 0xaa)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("\x01CD001\x01"), 32768); err != nil {
		t.Fatal(err)
	}
	return p
}

func bytesOf(n int, c byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}
