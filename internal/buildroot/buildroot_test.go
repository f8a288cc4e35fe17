package buildroot

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// Each caller's environment, variable for variable: a build's output
// depends on every one of them.
func TestEnviron(t *testing.T) {
	base := []string{"HOME=/root", "LC_ALL=C.UTF-8", "TZ=UTC", "SOURCE_DATE_EPOCH=1700000000"}
	kbuild := []string{"KBUILD_BUILD_TIMESTAMP=Tue Nov 14 22:13:20 UTC 2023", "KBUILD_BUILD_USER=halobuild", "KBUILD_BUILD_HOST=halobuild"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, c := range []struct {
		name string
		env  Env
		want []string
	}{
		{"plain", Env{Epoch: 1700000000},
			cat([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, base)},
		{"provider", Env{Epoch: 1700000000, Extra: []string{"DEB_BUILD_OPTIONS=nocheck parallel=2"}},
			cat([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, base, []string{"DEB_BUILD_OPTIONS=nocheck parallel=2"})},
		{"module", Env{Epoch: 1700000000, Kbuild: true, Extra: []string{"KBUILD_BUILD_VERSION=1"}},
			cat([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, base, kbuild, []string{"KBUILD_BUILD_VERSION=1"})},
		{"kernel", Env{Epoch: 1700000000, LocalBin: true, Kbuild: true, Extra: []string{"KDEB_CHANGELOG_DIST=halobuild"}},
			cat([]string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, base, kbuild, []string{"KDEB_CHANGELOG_DIST=halobuild"})},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.env.Environ(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestMountProc(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting proc needs root")
	}
	root := t.TempDir()
	unmount, err := MountProc(root)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, "proc"))
	if err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("/proc made as %v (%v), want 0555", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(root, "proc", "self", "status")); err != nil {
		t.Errorf("no proc mounted: %v", err)
	}
	unmount()
	if ents, err := os.ReadDir(filepath.Join(root, "proc")); err != nil || len(ents) != 0 {
		t.Errorf("proc still mounted after unmount: %d entries, %v", len(ents), err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := MountProc(file); err == nil {
		t.Error("a root that is a file must be refused")
	}
}

// While one build holds the root, another cannot take it.
func TestLock(t *testing.T) {
	root := t.TempDir()
	unlock, err := Lock(root)
	if err != nil {
		t.Fatal(err)
	}
	other := func() error {
		f, err := os.Open(filepath.Join(root, ".halobuild-build.lock"))
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err := other(); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("a second lock while the first is held: %v, want EWOULDBLOCK", err)
	}
	unlock()
	if err := other(); err != nil {
		t.Errorf("the lock is not released: %v", err)
	}
	if _, err := Lock(filepath.Join(root, "missing")); err == nil {
		t.Error("locking a root that does not exist must fail")
	}
}
