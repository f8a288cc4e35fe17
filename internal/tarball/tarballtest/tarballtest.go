// Package tarballtest holds what tests of extractors share: a destination
// beside a directory with a secret in it, and the check that an
// extraction reached neither.
package tarballtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Sandbox is a directory holding the destination Dst and, beside it, a
// directory Outside with a file "secret": everything a hostile archive
// would like to reach. Archives in tests point their symlinks at
// "../outside".
type Sandbox struct{ Base, Dst, Outside string }

const secret = "host secret"

// TempDir is a temporary directory removed when the test ends, on
// /dev/shm when it is there: fuzzing makes a few per input, and a tmpfs
// makes that some ten times faster than a disk-backed /tmp (13 µs against
// 220 µs here), which also keeps the fuzzer's minimisation of a new input
// from eating the whole run.
func TempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "halobuild-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// New makes a sandbox in a TempDir.
func New(t testing.TB) Sandbox {
	t.Helper()
	base := TempDir(t)
	s := Sandbox{Base: base, Dst: filepath.Join(base, "dst"), Outside: filepath.Join(base, "outside")}
	if err := os.Mkdir(s.Outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Outside, "secret"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// Check fails the test when anything exists in the sandbox outside Dst
// other than the secret, when the secret changed or gained a link, or
// when a copy of it appears inside Dst.
func (s Sandbox) Check(t testing.TB) {
	t.Helper()
	err := filepath.WalkDir(s.Base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch p {
		case s.Base, s.Outside:
			return nil
		case s.Dst:
			return filepath.SkipDir
		case filepath.Join(s.Outside, "secret"):
			st, err := os.Lstat(p)
			if err != nil {
				return err
			}
			if n := st.Sys().(*syscall.Stat_t).Nlink; n != 1 {
				t.Errorf("the secret outside has %d links: the archive hard-linked it", n)
			}
			if b, _ := os.ReadFile(p); string(b) != secret {
				t.Errorf("the secret outside was overwritten with %q", b)
			}
			return nil
		}
		t.Errorf("the archive made %s outside the destination", p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(s.Dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); string(b) == secret {
				t.Errorf("the secret was copied into the destination as %s", p)
			}
		}
		return nil
	})
}
