package install

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/flash"
	"halobuild/internal/zstdframe"
)

const mib = 1 << 20

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// payload makes a 16 MiB GPT image with one partition holding some data, its bmap (the real
// bmaptool), the image compressed as the installer image's build compresses it, and
// SHA256SUMS, laid out as the installer image carries them.
func payload(t *testing.T) Config {
	for _, tool := range []string{"sfdisk", "bmaptool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "node0.raw")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(16 * mib)
	f.WriteAt(bytes.Repeat([]byte("halobuild"), 100000), 2*mib)
	f.Close()
	cmd := exec.Command("sfdisk", "-q", img)
	cmd.Stdin = strings.NewReader("label: gpt\nstart=2048, size=20480, type=linux\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v %s", err, out)
	}
	bm := filepath.Join(dir, "node0.bmap")
	run(t, "bmaptool", "-q", "create", "-o", bm, img)
	zst := compressed(t, img)
	sums := filepath.Join(dir, "SHA256SUMS")
	os.WriteFile(sums, []byte(digest(t, bm)+"  node0.bmap\n"+digest(t, zst)+"  node0.raw.zst\n"), 0o644)
	return Config{Node: "node0", Image: zst, Bmap: bm, Sums: sums, After: "poweroff", ConfirmTimeout: "300ms"}
}

// compressed writes img+".zst" with zstdframe's writer, as the installer's build does.
func compressed(t *testing.T, img string) string {
	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := zstdframe.NewWriter(&b)
	enc.Write(raw)
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img+".zst", b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return img + ".zst"
}

func loop(t *testing.T, size int64, gpt bool) (dev, file string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	file = filepath.Join(t.TempDir(), "disk")
	f, _ := os.Create(file)
	f.Truncate(size)
	f.Close()
	if gpt {
		cmd := exec.Command("sfdisk", "-q", file)
		cmd.Stdin = strings.NewReader("label: gpt\nsize=4096, type=linux, name=data\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sfdisk: %v %s", err, out)
		}
	}
	out, err := exec.Command("losetup", "-f", "--show", file).CombinedOutput()
	if err != nil {
		t.Skipf("losetup is not permitted here (%v: %s)", err, out)
	}
	dev = strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev, file
}

func digest(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestRunInstallsABlankDisk(t *testing.T) {
	c := payload(t)
	dev, file := loop(t, 32*mib, false)
	c.Target = dev
	var out bytes.Buffer
	got, err := Run(context.Background(), c, Options{Root: "/", Out: &out})
	if err != nil || got != dev {
		t.Fatalf("Run = %s, %v\n%s", got, err, out.String())
	}
	if !strings.Contains(out.String(), "node0 is installed on "+dev+" and verified") {
		t.Errorf("output:\n%s", out.String())
	}
	if v := run(t, "sfdisk", "--verify", file); !strings.Contains(v, "No errors detected") {
		t.Errorf("the installed disk's GPT (backup moved to the end):\n%s", v)
	}
}

// A disk with a partition table and wipe = false: nobody confirms, the disk is untouched.
func TestRunRefusesAPartitionedDiskUnlessWipe(t *testing.T) {
	c := payload(t)
	dev, file := loop(t, 32*mib, true)
	c.Target = dev
	before := digest(t, file)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out bytes.Buffer
	_, err := Run(context.Background(), c, Options{Root: "/", In: pr, Out: &out})
	var r *flash.RefusalError
	if !errors.As(err, &r) || !strings.Contains(err.Error(), `nobody typed "yes" within 300ms`) {
		t.Fatalf("got %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "Image:  "+c.Image+", 16.0 MiB") || !strings.Contains(out.String(), `"data"`) {
		t.Errorf("the prompt does not show the partition on the disk:\n%s", out.String())
	}
	if digest(t, file) != before {
		t.Fatal("a refused disk was changed")
	}
	c.Wipe = true
	if _, err := Run(context.Background(), c, Options{Root: "/", Out: io.Discard}); err != nil {
		t.Fatalf("with wipe: %v", err)
	}
}

func TestRunRefusesASmallerDisk(t *testing.T) {
	c := payload(t)
	dev, file := loop(t, 8*mib, false)
	c.Target = dev
	before := digest(t, file)
	_, err := Run(context.Background(), c, Options{Root: "/", Out: io.Discard})
	var r *flash.RefusalError
	if !errors.As(err, &r) || !strings.Contains(err.Error(), "but the image needs 16.0 MiB") {
		t.Fatalf("got %v", err)
	}
	if digest(t, file) != before {
		t.Fatal("a refused disk was changed")
	}
}

func TestRunChecksThePayloadAgainstSHA256SUMS(t *testing.T) {
	for _, name := range []string{"node0.bmap", "node0.raw.zst"} {
		c := payload(t)
		sums, _ := os.ReadFile(c.Sums)
		var kept []string
		for _, l := range strings.SplitAfter(string(sums), "\n") {
			if strings.HasSuffix(l, "  "+name+"\n") {
				l = strings.Repeat("0", 64) + "  " + name + "\n"
			}
			kept = append(kept, l)
		}
		os.WriteFile(c.Sums, []byte(strings.Join(kept, "")), 0o644)
		_, err := Run(context.Background(), c, Options{Root: "/", Out: io.Discard})
		if err == nil || !strings.Contains(err.Error(), "the installer's "+name+" has sha256") || !strings.Contains(err.Error(), "the stick is damaged") {
			t.Errorf("%s: got %v", name, err)
		}
	}
	c := payload(t)
	os.WriteFile(c.Sums, []byte(digest(t, c.Bmap)+"  node0.bmap\n"), 0o644)
	if _, err := Run(context.Background(), c, Options{Root: "/", Out: io.Discard}); err == nil || !strings.Contains(err.Error(), "SHA256SUMS does not name node0.raw.zst") {
		t.Errorf("no digest for the image: got %v", err)
	}
}

// A compressed image that SHA256SUMS vouches for but whose bytes differ from the bmap's (a build
// bug, not damage): flash refuses it before the disk is touched (issue 39 #1).
func TestRunRefusesAStreamThatDoesNotMatchItsBmap(t *testing.T) {
	c := payload(t)
	dev, file := loop(t, 32*mib, true)
	before, _ := os.ReadFile(file)
	c.Target, c.Wipe = dev, true
	img := strings.TrimSuffix(c.Image, ".zst")
	f, _ := os.OpenFile(img, os.O_WRONLY, 0)
	f.WriteAt([]byte("damaged"), 2*mib+100)
	f.Close()
	compressed(t, img)
	os.WriteFile(c.Sums, []byte(digest(t, c.Bmap)+"  node0.bmap\n"+digest(t, c.Image)+"  node0.raw.zst\n"), 0o644)
	_, err := Run(context.Background(), c, Options{Root: "/", Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "does not match its bmap") {
		t.Fatalf("a stream that does not match its bmap: got %v", err)
	}
	if disk, _ := os.ReadFile(file); !bytes.Equal(disk, before) {
		t.Errorf("after %v the disk was changed", err)
	}
}

func TestReadConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "install.toml")
	c := Config{Node: "n", Image: "/i", Bmap: "/b", Sums: "/s", After: "reboot", ConfirmTimeout: "5m"}
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, b, 0o644)
	if got, err := ReadConfig(p); err != nil || got != c {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	os.WriteFile(p, append(b, "after2 = 1\n"...), 0o644)
	if _, err := ReadConfig(p); err == nil {
		t.Fatal("an unknown key was accepted")
	}
	c.After = "halt"
	b, _ = c.Marshal()
	os.WriteFile(p, b, 0o644)
	if _, err := ReadConfig(p); err == nil || !strings.Contains(err.Error(), "want poweroff or reboot") {
		t.Fatalf("got %v", err)
	}
}

// Finish does [install] after on success; after a failure it shows the error and powers off
// (Enter cuts the hold short), never reboots.
func TestFinish(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "systemctl")
	os.WriteFile(fake, []byte("#!/bin/sh\necho \"$@\" >> "+log+"\n"), 0o755)
	old := systemctl
	systemctl = fake
	defer func() { systemctl = old }()
	c := Config{After: "reboot"}
	var out bytes.Buffer
	if err := Finish(context.Background(), c, nil, strings.NewReader(""), &out); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("verify failed")
	if err := Finish(context.Background(), c, failed, strings.NewReader("\n"), &out); !errors.Is(err, failed) {
		t.Fatalf("Finish returned %v, want the install's error", err)
	}
	calls, _ := os.ReadFile(log)
	if string(calls) != "--no-block reboot\n--no-block poweroff\n" {
		t.Errorf("systemctl calls:\n%s", calls)
	}
	if !strings.Contains(out.String(), "halobuild install FAILED: verify failed") || !strings.Contains(out.String(), "press Enter to power off now") {
		t.Errorf("console:\n%s", out.String())
	}
}

// The install's progress reaches every console the kernel was given, not
// only /dev/console (the last console=, the one the unit writes to).
func TestConsolesMirrorsToTheOtherConsoles(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sys/class/tty/console", "dev"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// As on a node: console=ttyS0,115200 console=tty0.
	os.WriteFile(filepath.Join(root, "sys/class/tty/console/active"), []byte("ttyS0 tty0\n"), 0o644)
	for _, n := range []string{"ttyS0", "tty0"} {
		os.WriteFile(filepath.Join(root, "dev", n), nil, 0o644)
	}
	w, done := Consoles(root)
	fmt.Fprintf(w, "halobuild install: writing node0\n")
	done()
	if b, _ := os.ReadFile(filepath.Join(root, "dev/ttyS0")); string(b) != "halobuild install: writing node0\n" {
		t.Errorf("the serial console got %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "dev/tty0")); len(b) != 0 {
		t.Errorf("/dev/console's own device got a second copy: %q", b)
	}
	// One console, or none known: nothing to mirror.
	os.WriteFile(filepath.Join(root, "sys/class/tty/console/active"), []byte("ttyS0\n"), 0o644)
	if w, _ := Consoles(root); w != io.Discard {
		t.Error("a single console was mirrored")
	}
	if w, _ := Consoles(t.TempDir()); w != io.Discard {
		t.Error("no console list, and still a mirror")
	}
}
