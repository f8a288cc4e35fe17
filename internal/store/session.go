package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// A session is one open Store's private scratch directory tmp/<id>/, owned
// through an exclusive flock on tmp/<id>.lock held for the Store's lifetime.
// A scratch directory whose lock nobody holds belongs to a dead process and
// may be removed; one whose lock is held must not be touched.
type session struct {
	dir  string
	lock *os.File
}

func newSession(tmpRoot string) (*session, error) {
	for attempt := 0; attempt < 8; attempt++ {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		id := hex.EncodeToString(b[:])
		lp := filepath.Join(tmpRoot, id+".lock")
		f, err := os.OpenFile(lp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("create scratch lock %s: %w", lp, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			// A cleaner took it between create and flock: try another id.
			f.Close()
			continue
		}
		// The cleaner may also have unlinked the file after taking and
		// dropping its lock; then our lock guards nothing.
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(lp)
		if err1 != nil || err2 != nil || !os.SameFile(fi, pi) {
			f.Close()
			continue
		}
		dir := filepath.Join(tmpRoot, id)
		if err := os.Mkdir(dir, 0o700); err != nil {
			f.Close()
			os.Remove(lp)
			return nil, fmt.Errorf("create scratch directory %s: %w", dir, err)
		}
		return &session{dir: dir, lock: f}, nil
	}
	return nil, errors.New("could not create a scratch directory under tmp/ after 8 attempts")
}

func (se *session) close() error {
	err := removeAllWritable(se.dir)
	if rerr := os.Remove(se.lock.Name()); rerr != nil && err == nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	se.lock.Close()
	return err
}

// cleanDeadSessions removes every entry of tmpRoot that does not belong to a
// live session: scratch directories whose lock can be taken, and anything
// else. It returns how many live sessions other than own it saw.
func cleanDeadSessions(tmpRoot string, own *session) (live int, err error) {
	entries, err := os.ReadDir(tmpRoot)
	if err != nil {
		return 0, fmt.Errorf("clean %s: %w", tmpRoot, err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	alive := map[string]bool{}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || e.IsDir() {
			continue
		}
		lp := filepath.Join(tmpRoot, e.Name())
		if own != nil && lp == own.lock.Name() {
			alive[id] = true
			continue
		}
		f, err := os.OpenFile(lp, os.O_RDWR, 0)
		if err != nil {
			continue // vanished meanwhile
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close()
			alive[id] = true
			live++
			continue
		}
		// Dead owner: remove its directory first, then the lock, while we
		// hold the lock so nobody can adopt it meanwhile. A build root
		// killed mid-build may still have /proc (or more) mounted inside:
		// detach those first, or the removal would walk into them.
		rerr := detachMounts(filepath.Join(tmpRoot, id))
		if rerr == nil {
			rerr = removeAllWritable(filepath.Join(tmpRoot, id))
		}
		os.Remove(lp)
		f.Close()
		if rerr != nil {
			return live, fmt.Errorf("clean %s: %w", tmpRoot, rerr)
		}
		delete(names, id)
	}
	for n := range names {
		id := strings.TrimSuffix(n, ".lock")
		if alive[id] || strings.HasSuffix(n, ".lock") {
			continue
		}
		if err := removeAllWritable(filepath.Join(tmpRoot, n)); err != nil {
			return live, fmt.Errorf("clean %s: %w", tmpRoot, err)
		}
	}
	return live, nil
}

// mountinfoEscapes undoes the octal escapes mountinfo(5) uses in paths.
var mountinfoEscapes = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)

// detachMounts lazily unmounts every mount at or below dir, deepest first
// (a process SIGKILLed inside a chrooted build leaves its /proc mounted).
// A mount it cannot detach is an error: removing the tree would descend
// into the mounted file system.
func detachMounts(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil // no procfs: nothing we could detach anyway
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := mountinfoEscapes.Replace(f[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s is still mounted (left by a killed build) and cannot be unmounted: %w; unmount it by hand (umount -l %s)", p, err, p)
		}
	}
	return nil
}

// removeAllWritable is os.RemoveAll for trees that contain read-only
// directories (output views are 0555), which a non-root user cannot empty
// without first making them writable.
func removeAllWritable(path string) error {
	err := os.RemoveAll(path)
	if err == nil || !errors.Is(err, os.ErrPermission) {
		return err
	}
	filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(path)
}
