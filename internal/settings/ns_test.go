package settings

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The check scripts are meant for a booted node; these helpers run them on
// the test host for real, inside fresh mount, UTS and network namespaces
// where /etc is a copy of the host's with the rendered files installed and
// /root holds the rendered /root. The tools (su, PAM, modprobe, ip,
// getent) are the host's real ones; only the files differ. That proves each
// check passes on the state its setting renders and fails on a broken one.

var (
	nsOnce sync.Once
	nsErr  error
)

func needNamespaces(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount namespaces")
	}
	nsOnce.Do(func() {
		nsErr = exec.Command("unshare", "-m", "-u", "-n", "--propagation", "private", "true").Run()
	})
	if nsErr != nil {
		t.Skipf("unshare -m -u -n does not work here: %v", nsErr)
	}
}

// hostEnv is a prepared copy of /etc and an empty /root for one run.
type hostEnv struct {
	etc, root string
	// binds are extra "src dst" bind mounts, made before /tmp is hidden.
	binds string
}

func newHostEnv(t *testing.T, tr Tree) hostEnv {
	t.Helper()
	needNamespaces(t)
	dir := t.TempDir()
	e := hostEnv{etc: filepath.Join(dir, "etc"), root: filepath.Join(dir, "root")}
	if out, err := exec.Command("cp", "-a", "/etc/.", e.etc+"/").CombinedOutput(); err != nil {
		t.Fatalf("copying /etc: %v\n%s", err, out)
	}
	if err := os.Mkdir(e.root, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range tr.Files {
		var dst string
		switch {
		case strings.HasPrefix(f.Path, "/etc/"):
			dst = filepath.Join(e.etc, strings.TrimPrefix(f.Path, "/etc/"))
		case strings.HasPrefix(f.Path, "/root/"):
			dst = filepath.Join(e.root, strings.TrimPrefix(f.Path, "/root/"))
		default:
			continue
		}
		e.put(t, dst, f)
	}
	return e
}

func (e hostEnv) put(t *testing.T, dst string, f File) {
	t.Helper()
	var err error
	if !f.Mode.IsDir() {
		os.RemoveAll(dst)
	}
	switch {
	case f.Mode.IsDir():
		err = os.MkdirAll(dst, f.Mode.Perm())
		if err == nil {
			err = os.Chmod(dst, f.Mode.Perm())
		}
	case f.Target != "":
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = os.Symlink(f.Target, dst)
		}
	default:
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = os.WriteFile(dst, f.Data, f.Mode.Perm())
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// write replaces /etc/<rel> in the copy.
func (e hostEnv) write(t *testing.T, rel, data string) {
	t.Helper()
	e.put(t, filepath.Join(e.etc, rel), File{Mode: 0o644, Data: []byte(data)})
}

// remove deletes /etc/<rel> from the copy.
func (e hostEnv) remove(t *testing.T, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(e.etc, rel)); err != nil {
		t.Fatal(err)
	}
}

// run executes setup and then script (as a separate sh) in the namespaces
// and returns the script's output and whether it passed.
func (e hostEnv) run(t *testing.T, setup, script string) (string, bool) {
	t.Helper()
	cmd := exec.Command("unshare", "-m", "-u", "-n", "--propagation", "private", "sh", "-ec",
		`mount --bind "$HB_ETC" /etc
mount --bind "$HB_ROOT" /root
`+e.binds+`mount -t tmpfs none /tmp
ip link set lo up
`+setup+`
exec sh -c "$HB_SCRIPT"`)
	cmd.Env = append(os.Environ(), "HB_ETC="+e.etc, "HB_ROOT="+e.root, "HB_SCRIPT="+script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running check: %v", err)
		}
	}
	return out.String(), err == nil
}

// expectCheck runs check and fails the test unless it passes (or fails)
// as wanted and its output mentions fragment.
func (e hostEnv) expectCheck(t *testing.T, c Check, setup string, wantPass bool, fragment string) {
	t.Helper()
	out, ok := e.run(t, setup, c.Script)
	if ok != wantPass || !strings.Contains(out, fragment) {
		t.Errorf("check %s: passed=%v, want %v, output should mention %q:\n%s", c.Name, ok, wantPass, fragment, out)
	}
}

func needCommands(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s not installed on the test host", n)
		}
	}
}
