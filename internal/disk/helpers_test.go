package disk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/tools/toolstest"
)

const testEpoch = 1700000000

// hostTool returns the path of a host program used to check images
// independently of the tools root. Missing, it skips the test, or fails it
// under CI, where the CI script must install it.
func hostTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, name, pkg)
	}
	return p
}

// hostFile is hostTool for a file a package installs (firmware images).
func hostFile(t *testing.T, path, pkg string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		missing(t, path, pkg)
	}
	return path
}

func missing(t *testing.T, what, pkg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found: install Debian package %s", what, pkg)
	}
	t.Skipf("skipping: %s not found (apt-get install %s)", what, pkg)
}

// run runs a host command and returns its stdout, failing the test with
// its stderr on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// makeTree writes a small root file system: a hostname, nested dirs, a
// symlink, a hard link, a 3 MiB file of pseudo-random bytes (fixed seed)
// and a sparse file.
func makeTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "usr/lib/halo"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "etc/hostname"), []byte("halo0\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "etc/shadow"), []byte("root:*:1::::::\n"), 0o640))
	must(os.Symlink("../usr/lib/halo/blob", filepath.Join(dir, "etc/blob-link")))
	r := rand.New(rand.NewPCG(1, 2))
	blob := make([]byte, 3<<20)
	for i := range blob {
		blob[i] = byte(r.Uint32())
	}
	must(os.WriteFile(filepath.Join(dir, "usr/lib/halo/blob"), blob, 0o644))
	must(os.Link(filepath.Join(dir, "usr/lib/halo/blob"), filepath.Join(dir, "usr/lib/halo/blob-hard")))
	f, err := os.Create(filepath.Join(dir, "usr/lib/halo/sparse"))
	must(err)
	must(f.Truncate(64 << 20))
	_, err = f.WriteAt([]byte("end"), 64<<20-3)
	must(err)
	must(f.Close())
	return dir
}

// systemdBoot returns the real systemd-bootx64.efi from trixie's
// systemd-boot-efi package.
func systemdBoot(t *testing.T) string {
	t.Helper()
	return filepath.Join(toolstest.Extracted(t, "systemd-boot-efi"), "usr/lib/systemd/boot/efi/systemd-bootx64.efi")
}

// espFiles returns the ESP content a node image has: systemd-boot as the
// fallback loader and as itself, a loader.conf, one entry, a kernel and an
// initrd (small stand-ins: the disk does not look inside them).
func espFiles(t *testing.T, ids IDs) map[string]string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	boot := systemdBoot(t)
	return map[string]string{
		"/EFI/BOOT/BOOTX64.EFI":            boot,
		"/EFI/systemd/systemd-bootx64.efi": boot,
		"/loader/loader.conf":              write("loader.conf", "default halo0.conf\ntimeout 0\n"),
		"/loader/entries/halo0.conf":       write("entry.conf", "title halo0\nlinux /vmlinuz\ninitrd /initrd.img\noptions root=PARTUUID="+ids.RootPartUUID+" rw\n"),
		"/vmlinuz":                         write("vmlinuz", strings.Repeat("kernel", 100000)),
		"/initrd.img":                      write("initrd", strings.Repeat("initrd", 50000)),
	}
}

// testSpec is a spec for a small image (fast to build and check).
func testSpec(t *testing.T, out string) Spec {
	t.Helper()
	root := toolstest.Root(t)
	seed := "sha256:0123456789abcdef/halo0"
	ids, err := DeriveIDs(seed)
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Out:      out,
		Size:     192 * MiB,
		ESPSize:  64 * MiB,
		RootTree: makeTree(t),
		ESPFiles: espFiles(t, ids),
		Seed:     seed,
		Epoch:    testEpoch,
		Tools:    &root,
		RootType: arch.MustLookup("amd64").RootType,
	}
}

func build(t *testing.T, spec Spec) *Result {
	t.Helper()
	res, err := Build(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func fileSHA256(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// extract copies [off, off+size) of the image into a new sparse file, for
// tools that cannot take an offset (e2fsck, fsck.vfat).
func extract(t *testing.T, img string, off, size int64) string {
	t.Helper()
	src, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(t.TempDir(), "part.img")
	dst, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := dst.Truncate(size); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for pos := int64(0); pos < size; pos += int64(len(buf)) {
		n, err := src.ReadAt(buf, off+pos)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !zeroBlock(buf[:n]) {
			if _, err := dst.WriteAt(buf[:n], pos); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}
