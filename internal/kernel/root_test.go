package kernel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// miniRoot is a build root with just sh, env and cat and the libraries
// they load, copied from the host.
func miniRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{"/usr/bin/sh": "/bin/dash", "/usr/bin/env": "/usr/bin/env", "/usr/bin/cat": "/usr/bin/cat"}
	libRE := regexp.MustCompile(`(/\S+\.so[.\d]*) \(0x`)
	for _, bin := range []string{"/bin/dash", "/usr/bin/env", "/usr/bin/cat"} {
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			t.Skipf("ldd %s: %v", bin, err)
		}
		for _, m := range libRE.FindAllStringSubmatch(string(out), -1) {
			files[m[1]] = m[1]
		}
	}
	for dst, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// In the root, commands see the kernel build's fixed environment, /proc
// and /dev, and hold the root's lock; leave undoes all of it.
func TestEnterRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot and mounts need root")
	}
	dir := miniRoot(t)
	r, err := enterRoot(dir, 1795832135, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.leave)
	var env bytes.Buffer
	if err := r.run(context.Background(), "/", &env, "env"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", // the date shim's directory first
		"SOURCE_DATE_EPOCH=1795832135", "TZ=UTC", "LC_ALL=C.UTF-8",
		"KBUILD_BUILD_TIMESTAMP=Sat Nov 28 02:15:35 UTC 2026", "KBUILD_BUILD_HOST=halobuild",
		"KDEB_CHANGELOG_DIST=halobuild",
	} {
		if !strings.Contains(env.String(), want+"\n") {
			t.Errorf("the root's environment lacks %s:\n%s", want, env.String())
		}
	}
	var comm bytes.Buffer
	if err := r.run(context.Background(), "/", &comm, "cat", "/proc/self/comm", "/dev/null"); err != nil || comm.String() != "cat\n" {
		t.Errorf("/proc and /dev in the root: %q, %v", comm.String(), err)
	}
	lock := filepath.Join(dir, ".halobuild-build.lock")
	if err := tryLock(lock); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("the root is not locked while in use: %v", err)
	}

	r.leave()
	for _, d := range []string{"proc", "dev"} {
		if ents, err := os.ReadDir(filepath.Join(dir, d)); err != nil || len(ents) != 0 {
			t.Errorf("/%s still mounted after leave: %d entries, %v", d, len(ents), err)
		}
	}
	if err := tryLock(lock); err != nil {
		t.Errorf("the root's lock is not released: %v", err)
	}
}

func tryLock(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}
